//! The dump format of `riptide dump` and `riptide load`, version 1 (described byte by byte in
//! `docs/format/dump.md`): a header naming the column family and its comparator, one record per
//! key-value pair in the column family's order, and a trailer with the record count and a
//! CRC32C of everything before the checksum.
//!
//! The writer streams (one pass, constant memory); the reader streams too and calls back once
//! per record, so that `load` can check a whole file (a first pass with a callback that does
//! nothing) before it writes anything, then load it (a second pass).
//!
//! Concurrency contract: plain values over one reader or writer, used by one thread.
//!
//! Invariants: a file the reader accepts has exactly the header, the records and the trailer,
//! with a matching count and checksum and nothing after the trailer; any other input is an
//! error naming the byte offset, never a panic. Lengths are checked against the remaining
//! input before anything is allocated, so a damaged length cannot exhaust memory.

use std::io::{Read, Write};

/// The first eight bytes of every dump.
pub const MAGIC: [u8; 8] = *b"RIPTDUMP";
/// The version this build writes and reads.
pub const VERSION: u32 = 1;
/// Tag of a key-value record.
const TAG_RECORD: u8 = 1;
/// Tag of the trailer.
const TAG_TRAILER: u8 = 0;
/// The longest name (column family or comparator) accepted in a header.
const MAX_NAME_BYTES: u64 = 1 << 16;

/// What the header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The column family the dump was taken from.
    pub column_family: String,
    /// The name of its comparator (the order of the records).
    pub comparator: String,
}

/// Writes a dump: [`DumpWriter::new`] writes the header, [`DumpWriter::record`] each pair,
/// [`DumpWriter::finish`] the trailer.
pub struct DumpWriter<W: Write> {
    out: W,
    crc: u32,
    records: u64,
}

impl<W: Write> DumpWriter<W> {
    /// Starts a dump of `header` on `out`.
    pub fn new(out: W, header: &Header) -> std::io::Result<DumpWriter<W>> {
        let mut writer = DumpWriter { out, crc: 0, records: 0 };
        writer.write(&MAGIC)?;
        writer.write(&VERSION.to_le_bytes())?;
        writer.length_prefixed(header.column_family.as_bytes())?;
        writer.length_prefixed(header.comparator.as_bytes())?;
        Ok(writer)
    }

    /// Appends one pair.
    pub fn record(&mut self, key: &[u8], value: &[u8]) -> std::io::Result<()> {
        self.write(&[TAG_RECORD])?;
        self.length_prefixed(key)?;
        self.length_prefixed(value)?;
        self.records += 1;
        Ok(())
    }

    /// Writes the trailer and returns the output and the number of records.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        self.write(&[TAG_TRAILER])?;
        self.write(&self.records.to_le_bytes())?;
        let checksum = self.crc;
        self.out.write_all(&checksum.to_le_bytes())?;
        self.out.flush()?;
        Ok((self.out, self.records))
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.out.write_all(bytes)
    }

    fn length_prefixed(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut varint = Vec::with_capacity(10);
        let mut value = bytes.len() as u64;
        while value >= 0x80 {
            varint.push((value as u8) | 0x80);
            value >>= 7;
        }
        varint.push(value as u8);
        self.write(&varint)?;
        self.write(bytes)
    }
}

/// Why a dump was refused.
#[derive(Debug)]
pub enum DumpError {
    /// Reading failed.
    Io(std::io::Error),
    /// The bytes are not a valid dump: the offset of the fault and what is wrong.
    Invalid(u64, String),
}

/// Reads a dump of `total_bytes` bytes from `input`, calling `on_record` for each pair in
/// order; `on_progress` is told the offset reached now and then. Returns the header and the
/// number of records once the trailer's count and checksum have matched.
pub fn read_dump<R: Read, E>(
    input: R,
    total_bytes: u64,
    mut on_record: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    mut on_progress: impl FnMut(u64),
) -> Result<Result<(Header, u64), E>, DumpError> {
    let mut reader = DumpReader { input, offset: 0, crc: 0, total_bytes };
    let mut magic = [0u8; 8];
    reader.exact(&mut magic)?;
    if magic != MAGIC {
        return Err(DumpError::Invalid(0, "not a Riptide dump (bad magic)".to_string()));
    }
    let mut version = [0u8; 4];
    reader.exact(&mut version)?;
    let version = u32::from_le_bytes(version);
    if version != VERSION {
        return Err(DumpError::Invalid(
            8,
            format!("dump format version {version}; this build reads version {VERSION}"),
        ));
    }
    let column_family = reader.name("column family name")?;
    let comparator = reader.name("comparator name")?;
    let mut records: u64 = 0;
    let mut key = Vec::new();
    let mut value = Vec::new();
    loop {
        let tag_offset = reader.offset;
        let mut tag = [0u8; 1];
        reader.exact(&mut tag)?;
        match tag[0] {
            TAG_RECORD => {
                reader.length_prefixed(&mut key)?;
                reader.length_prefixed(&mut value)?;
                if let Err(error) = on_record(&key, &value) {
                    return Ok(Err(error));
                }
                records += 1;
                if records.is_multiple_of(4096) {
                    on_progress(reader.offset);
                }
            }
            TAG_TRAILER => break,
            other => return Err(DumpError::Invalid(tag_offset, format!("unknown record tag {other}"))),
        }
    }
    let count_offset = reader.offset;
    let mut count = [0u8; 8];
    reader.exact(&mut count)?;
    let count = u64::from_le_bytes(count);
    if count != records {
        return Err(DumpError::Invalid(
            count_offset,
            format!("trailer says {count} records, the file holds {records}"),
        ));
    }
    let computed = reader.crc;
    let checksum_offset = reader.offset;
    let mut stored = [0u8; 4];
    reader.exact(&mut stored)?;
    let stored = u32::from_le_bytes(stored);
    if stored != computed {
        return Err(DumpError::Invalid(
            checksum_offset,
            format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"),
        ));
    }
    let mut rest = [0u8; 1];
    match reader.input.read(&mut rest) {
        Ok(0) => {}
        Ok(_) => return Err(DumpError::Invalid(reader.offset, "bytes after the trailer".to_string())),
        Err(error) => return Err(DumpError::Io(error)),
    }
    on_progress(reader.offset);
    Ok(Ok((Header { column_family, comparator }, records)))
}

/// The reading state: position and running checksum.
struct DumpReader<R: Read> {
    input: R,
    offset: u64,
    crc: u32,
    total_bytes: u64,
}

impl<R: Read> DumpReader<R> {
    fn exact(&mut self, buffer: &mut [u8]) -> Result<(), DumpError> {
        match self.input.read_exact(buffer) {
            Ok(()) => {
                self.crc = crc32c::crc32c_append(self.crc, buffer);
                self.offset += buffer.len() as u64;
                Ok(())
            }
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(DumpError::Invalid(self.offset, "the file ends before the trailer (truncated)".to_string()))
            }
            Err(error) => Err(DumpError::Io(error)),
        }
    }

    fn varint(&mut self) -> Result<u64, DumpError> {
        let start = self.offset;
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let mut byte = [0u8; 1];
            self.exact(&mut byte)?;
            let bits = u64::from(byte[0] & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte[0] & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DumpError::Invalid(start, "malformed length".to_string()))
    }

    fn length_prefixed(&mut self, buffer: &mut Vec<u8>) -> Result<(), DumpError> {
        let start = self.offset;
        let length = self.varint()?;
        if length > self.total_bytes.saturating_sub(self.offset) {
            return Err(DumpError::Invalid(start, format!("length {length} runs past the end of the file")));
        }
        buffer.clear();
        buffer.resize(length as usize, 0);
        self.exact(buffer)
    }

    fn name(&mut self, what: &str) -> Result<String, DumpError> {
        let start = self.offset;
        let mut bytes = Vec::new();
        self.length_prefixed(&mut bytes)?;
        if bytes.len() as u64 > MAX_NAME_BYTES {
            return Err(DumpError::Invalid(start, format!("{what} is too long")));
        }
        String::from_utf8(bytes).map_err(|_| DumpError::Invalid(start, format!("{what} is not UTF-8")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let header = Header { column_family: "users".to_string(), comparator: "riptide.bytewise".to_string() };
        let mut writer = DumpWriter::new(Vec::new(), &header).unwrap();
        writer.record(b"a", b"1").unwrap();
        writer.record(b"", &[0u8; 300]).unwrap();
        writer.finish().unwrap().0
    }

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn read(bytes: &[u8]) -> Result<(Header, u64, Pairs), DumpError> {
        let mut pairs = Vec::new();
        let result = read_dump(
            bytes,
            bytes.len() as u64,
            |key, value| {
                pairs.push((key.to_vec(), value.to_vec()));
                Ok::<(), ()>(())
            },
            |_| {},
        )?;
        let (header, count) = result.unwrap();
        Ok((header, count, pairs))
    }

    #[test]
    fn a_dump_round_trips() {
        let (header, count, pairs) = read(&sample()).unwrap();
        assert_eq!(header.column_family, "users");
        assert_eq!(count, 2);
        assert_eq!(pairs[1].1.len(), 300);
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let bytes = sample();
        for position in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[position] ^= 0x20;
            assert!(read(&damaged).is_err(), "flip at {position}");
            assert!(read(&bytes[..position]).is_err(), "cut at {position}");
        }
    }
}
