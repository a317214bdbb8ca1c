//! Little helpers to encode and decode integers: fixed-width little-endian and LEB128 varints.
//!
//! Decoders never panic on short or malformed input; they return `None` and let the caller turn
//! that into an [`crate::Error::Corruption`] with the file and offset it knows.

/// Appends `value` as a LEB128 varint (at most 5 bytes).
pub(crate) fn put_varint32(out: &mut Vec<u8>, value: u32) {
    put_varint64(out, u64::from(value));
}

/// Appends `value` as a LEB128 varint (at most 10 bytes).
pub(crate) fn put_varint64(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Number of bytes `put_varint64` would write for `value`.
pub(crate) fn varint_length(mut value: u64) -> usize {
    let mut length = 1;
    while value >= 0x80 {
        value >>= 7;
        length += 1;
    }
    length
}

/// Decodes a varint from the front of `input`, returning the value and the bytes consumed.
pub(crate) fn get_varint64(input: &[u8]) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (index, &byte) in input.iter().enumerate().take(10) {
        let shift = 7 * index as u32;
        if index == 9 && byte > 1 {
            return None;
        }
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((result, index + 1));
        }
    }
    None
}

/// Decodes a varint that must fit in 32 bits.
pub(crate) fn get_varint32(input: &[u8]) -> Option<(u32, usize)> {
    let (value, length) = get_varint64(input)?;
    u32::try_from(value).ok().map(|v| (v, length))
}

/// Appends a length-prefixed byte string.
#[inline]
pub(crate) fn put_length_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Decodes a length-prefixed byte string, returning it and the bytes consumed.
pub(crate) fn get_length_prefixed(input: &[u8]) -> Option<(&[u8], usize)> {
    let (length, header) = get_varint64(input)?;
    let length = usize::try_from(length).ok()?;
    let end = header.checked_add(length)?;
    let bytes = input.get(header..end)?;
    Some((bytes, end))
}

/// Reads a little-endian u32 at `offset`.
pub(crate) fn read_u32(input: &[u8], offset: usize) -> Option<u32> {
    let bytes = input.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Reads a little-endian u64 at `offset`.
pub(crate) fn read_u64(input: &[u8], offset: usize) -> Option<u64> {
    let bytes = input.get(offset..offset.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// A CRC32C masked the way LevelDB does, so that a CRC stored inside checksummed data does not
/// make the outer checksum degenerate.
pub(crate) fn masked_crc(data: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c(data))
}

/// Masks a raw CRC32C (rotate and add a constant).
pub(crate) fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip() {
        let values = [0u64, 1, 127, 128, 255, 300, 16_383, 16_384, u32::MAX as u64, u64::MAX];
        for &value in &values {
            let mut out = Vec::new();
            put_varint64(&mut out, value);
            assert_eq!(out.len(), varint_length(value));
            assert_eq!(get_varint64(&out), Some((value, out.len())));
        }
    }

    #[test]
    fn varint_rejects_truncated_and_overlong() {
        assert_eq!(get_varint64(&[0x80]), None);
        assert_eq!(get_varint64(&[0xff; 11]), None);
        let mut out = Vec::new();
        put_varint64(&mut out, u64::from(u32::MAX) + 1);
        assert_eq!(get_varint32(&out), None);
    }

    #[test]
    fn length_prefixed_round_trip_and_truncation() {
        let mut out = Vec::new();
        put_length_prefixed(&mut out, b"hello");
        assert_eq!(get_length_prefixed(&out), Some((&b"hello"[..], 6)));
        assert_eq!(get_length_prefixed(&out[..4]), None);
    }
}
