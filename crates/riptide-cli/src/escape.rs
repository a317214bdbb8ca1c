//! How keys and values travel through the command line: escaping, hex, and line formats.
//!
//! Keys and values are arbitrary bytes, so the tool never prints them raw. The default text
//! form ("escaped") keeps printable ASCII (0x20 to 0x7e) as is, except the backslash, and writes
//! every other byte as an escape: `\\` for a backslash, `\t`, `\n` and `\r` for tab, newline and
//! carriage return, and `\xNN` (two lowercase hex digits) for anything else. An escaped key
//! therefore never holds a tab or a newline, which is what lets `scan` print one pair per line,
//! key and value separated by one tab. `--hex` prints every byte as two lowercase hex digits
//! instead. Arguments are read back the same way: escapes are decoded (hex digits in either
//! case), and with `--hex` the argument is a hex string.
//!
//! `--json` prints one JSON object per line (`{"key":"...","value":"..."}`) whose strings hold
//! the escaped or hex form above; since that form is printable ASCII, the only characters JSON
//! needs escaped are `"` and `\`.
//!
//! Concurrency contract: pure functions.
//!
//! Invariants: `unescape(escape(bytes)) == bytes` and `decode_hex(encode_hex(bytes)) == bytes`
//! for every byte string; decoding never panics and reports malformed input as an error.

use std::fmt::Write as _;

/// How keys and values are written as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Printable ASCII as is, other bytes escaped.
    Escaped,
    /// Two hex digits per byte.
    Hex,
}

/// How each output record is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Fields separated by a tab, one record per line.
    Tabs,
    /// One JSON object per line.
    Json,
}

/// The output style chosen on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// How bytes become text.
    pub encoding: Encoding,
    /// How records are framed.
    pub framing: Framing,
}

impl Style {
    /// The style for the `--hex` and `--json` flags.
    pub fn from_flags(hex: bool, json: bool) -> Style {
        Style {
            encoding: if hex { Encoding::Hex } else { Encoding::Escaped },
            framing: if json { Framing::Json } else { Framing::Tabs },
        }
    }

    /// `bytes` as text in this style's encoding.
    pub fn encode(&self, bytes: &[u8]) -> String {
        match self.encoding {
            Encoding::Escaped => escape(bytes),
            Encoding::Hex => encode_hex(bytes),
        }
    }

    /// Decodes a command-line argument written in this style's encoding.
    pub fn decode(&self, text: &str) -> Result<Vec<u8>, String> {
        match self.encoding {
            Encoding::Escaped => unescape(text),
            Encoding::Hex => decode_hex(text),
        }
    }

    /// One output line (without its newline) of named fields, in order.
    pub fn line(&self, fields: &[(&str, &[u8])]) -> String {
        match self.framing {
            Framing::Tabs => fields.iter().map(|(_, bytes)| self.encode(bytes)).collect::<Vec<_>>().join("\t"),
            Framing::Json => {
                let mut line = String::from("{");
                for (index, (name, bytes)) in fields.iter().enumerate() {
                    if index > 0 {
                        line.push(',');
                    }
                    line.push_str(&json_string(name));
                    line.push(':');
                    line.push_str(&json_string(&self.encode(bytes)));
                }
                line.push('}');
                line
            }
        }
    }
}

/// The escaped text form of `bytes` (see the module documentation).
pub fn escape(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for &byte in bytes {
        match byte {
            b'\\' => text.push_str("\\\\"),
            b'\t' => text.push_str("\\t"),
            b'\n' => text.push_str("\\n"),
            b'\r' => text.push_str("\\r"),
            0x20..=0x7e => text.push(char::from(byte)),
            _ => {
                // Writing to a String cannot fail.
                let _ = write!(text, "\\x{byte:02x}");
            }
        }
    }
    text
}

/// Decodes the escaped text form; any other backslash sequence is an error, so that a typo is
/// reported instead of silently becoming a different key.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let input = text.as_bytes();
    let mut bytes = Vec::with_capacity(input.len());
    let mut position = 0;
    while let Some(&byte) = input.get(position) {
        if byte != b'\\' {
            bytes.push(byte);
            position += 1;
            continue;
        }
        let escaped = match input.get(position + 1) {
            Some(b'\\') => b'\\',
            Some(b't') => b'\t',
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b'x') => {
                let digits = input
                    .get(position + 2..position + 4)
                    .ok_or_else(|| format!("{text:?}: \\x at byte {position} needs two hex digits"))?;
                let value = hex_pair(digits[0], digits[1])
                    .ok_or_else(|| format!("{text:?}: \\x at byte {position} needs two hex digits"))?;
                bytes.push(value);
                position += 4;
                continue;
            }
            Some(other) => {
                return Err(format!(
                    "{text:?}: unknown escape \\{} at byte {position} (use \\\\, \\t, \\n, \\r or \\xNN)",
                    char::from(*other)
                ))
            }
            None => return Err(format!("{text:?}: a lone backslash ends the argument (write \\\\)")),
        };
        bytes.push(escaped);
        position += 2;
    }
    Ok(bytes)
}

/// Two lowercase hex digits per byte.
pub fn encode_hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        // Writing to a String cannot fail.
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// Decodes a hex string (either case, an even number of digits).
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("{text:?}: a hex string needs an even number of digits"));
    }
    digits
        .chunks_exact(2)
        .map(|pair| hex_pair(pair[0], pair[1]).ok_or_else(|| format!("{text:?}: not a hex string")))
        .collect()
}

fn hex_digit(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

fn hex_pair(high: u8, low: u8) -> Option<u8> {
    Some(hex_digit(high)? << 4 | hex_digit(low)?)
}

/// A JSON string literal holding `text`. Control characters and non-ASCII characters are
/// escaped too, so that the function is correct for any text, not only for the escaped form.
pub fn json_string(text: &str) -> String {
    let mut literal = String::with_capacity(text.len() + 2);
    literal.push('"');
    for character in text.chars() {
        match character {
            '"' => literal.push_str("\\\""),
            '\\' => literal.push_str("\\\\"),
            ' '..='~' => literal.push(character),
            _ => {
                let mut units = [0u16; 2];
                for unit in character.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(literal, "\\u{unit:04x}");
                }
            }
        }
    }
    literal.push('"');
    literal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_through_both_encodings() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(&escape(&all)).unwrap(), all);
        assert_eq!(decode_hex(&encode_hex(&all)).unwrap(), all);
        assert!(!escape(&all).contains(['\t', '\n']));
    }

    #[test]
    fn escapes_are_as_documented() {
        assert_eq!(escape(b"a b\\\t\n\r\x00\xff"), "a b\\\\\\t\\n\\r\\x00\\xff");
        assert_eq!(unescape("\\x4A\\x4b").unwrap(), b"JK");
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in ["\\", "\\q", "\\x", "\\x4", "\\xzz"] {
            assert!(unescape(bad).is_err(), "{bad}");
        }
        for bad in ["a", "abc", "zz"] {
            assert!(decode_hex(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_lines_quote_backslashes() {
        let style = Style::from_flags(false, true);
        assert_eq!(style.line(&[("key", b"a\"\x01")]), r#"{"key":"a\"\\x01"}"#);
    }
}
