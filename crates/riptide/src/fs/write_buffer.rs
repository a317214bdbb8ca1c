//! The user-space write buffer of a real file: appended bytes are gathered here and handed to
//! the kernel in large writes, laid out in memory at the same offset modulo 64 as they will
//! have in the file.
//!
//! Why the layout: the speed of the kernel's copy of a `write` into the page cache
//! (`copy_folio_from_iter_atomic`) depends, on this machine, on where the source and the
//! destination sit within their 64-byte cache lines. Measured (kernel 6.18, ext4, AMD EPYC,
//! 4 MiB writes from a buffer 16 bytes into a line): 4.7-5.1 GB/s when the file offset sat at
//! 0, 16 or 48 bytes into a line, 3.4-3.8 GB/s at 32 or 40, and 2.3-2.4 GB/s at 24. Buffers
//! that start where their bytes will sit in the file make every copy the fast one, and so does
//! copying large appends through the buffer rather than writing them from wherever the
//! caller's memory happens to lie (a write-ahead log record's payload follows an 8-byte header,
//! so it lands 8 bytes off from its batch's buffer).
//!
//! Concurrency contract: one owner (`&mut self`), like the file it serves.
//!
//! Invariants: the buffered bytes are `storage[start..end]`, `start < ALIGNMENT_BYTES`, and
//! `storage.as_ptr() + start` is congruent to the file offset of the first buffered byte modulo
//! `ALIGNMENT_BYTES`; bytes reach the sink in the order they were appended, each exactly once.

use std::io::Write;

/// The alignment kept between the buffer and the file: one cache line.
const ALIGNMENT_BYTES: usize = 64;

/// A write buffer that keeps its bytes at their file offset's alignment.
pub(crate) struct AlignedWriteBuffer {
    /// `capacity + ALIGNMENT_BYTES` bytes, so that a full capacity fits after any start.
    storage: Box<[u8]>,
    /// How many bytes are gathered before they are written.
    capacity_bytes: usize,
    /// Where the buffered bytes begin.
    start: usize,
    /// Where they end.
    end: usize,
    /// The file offset of `storage[start]`: everything before it has been written.
    written_bytes: u64,
}

impl AlignedWriteBuffer {
    /// A buffer gathering `capacity_bytes` (more than zero) before each write, for a file whose
    /// next byte goes to offset `file_offset_bytes`.
    pub(crate) fn new(capacity_bytes: usize, file_offset_bytes: u64) -> AlignedWriteBuffer {
        assert!(capacity_bytes > 0, "a write buffer needs room");
        let mut buffer = AlignedWriteBuffer {
            storage: vec![0u8; capacity_bytes + ALIGNMENT_BYTES].into_boxed_slice(),
            capacity_bytes,
            start: 0,
            end: 0,
            written_bytes: file_offset_bytes,
        };
        buffer.realign();
        buffer
    }

    /// Appends `data`, writing to `sink` whenever the buffer fills. On an error the bytes not yet
    /// written stay unknown to the caller; the file's owner treats the file as failed.
    pub(crate) fn append(&mut self, sink: &mut impl Write, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let room = self.capacity_bytes - (self.end - self.start);
            if room == 0 {
                self.write_out(sink)?;
                continue;
            }
            let taken = room.min(data.len());
            let (now, later) = data.split_at(taken);
            self.storage[self.end..self.end + taken].copy_from_slice(now);
            self.end += taken;
            data = later;
        }
        Ok(())
    }

    /// Writes every buffered byte to `sink`.
    pub(crate) fn write_out(&mut self, sink: &mut impl Write) -> std::io::Result<()> {
        if self.end == self.start {
            return Ok(());
        }
        sink.write_all(&self.storage[self.start..self.end])?;
        self.written_bytes += (self.end - self.start) as u64;
        self.realign();
        Ok(())
    }

    /// The file offset up to which bytes were handed to the sink.
    pub(crate) fn written_bytes(&self) -> u64 {
        self.written_bytes
    }

    /// Bytes appended but not yet written.
    #[cfg(test)]
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.end - self.start
    }

    /// Empties the buffer and places its start at the alignment of the next file offset.
    fn realign(&mut self) {
        let address = self.storage.as_ptr() as usize;
        let wanted = (self.written_bytes % ALIGNMENT_BYTES as u64) as usize;
        let start = (wanted + ALIGNMENT_BYTES - address % ALIGNMENT_BYTES) % ALIGNMENT_BYTES;
        self.start = start;
        self.end = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that records each write's bytes and the address they were written from.
    #[derive(Default)]
    struct RecordingSink {
        bytes: Vec<u8>,
        writes: Vec<(usize, usize)>,
        fail_next: bool,
    }

    impl Write for RecordingSink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if std::mem::take(&mut self.fail_next) {
                return Err(std::io::Error::from_raw_os_error(5));
            }
            self.writes.push((buf.as_ptr() as usize, buf.len()));
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn pattern(length: usize, seed: usize) -> Vec<u8> {
        (0..length).map(|index| (index * 7 + seed * 13 + 1) as u8).collect()
    }

    #[test]
    fn bytes_arrive_in_order_and_every_write_starts_at_its_file_alignment() {
        for initial_offset in [0u64, 1, 8, 63, 64, 4097] {
            let mut sink = RecordingSink::default();
            let mut buffer = AlignedWriteBuffer::new(1000, initial_offset);
            let mut expected = Vec::new();
            for (seed, length) in [5usize, 0, 999, 1000, 1001, 3, 4500, 17].into_iter().enumerate() {
                let data = pattern(length, seed);
                buffer.append(&mut sink, &data).unwrap();
                expected.extend_from_slice(&data);
                if seed % 3 == 2 {
                    buffer.write_out(&mut sink).unwrap();
                }
            }
            buffer.write_out(&mut sink).unwrap();
            assert_eq!(sink.bytes, expected, "initial offset {initial_offset}");
            let mut file_offset = initial_offset;
            for &(address, length) in &sink.writes {
                assert_eq!(address % ALIGNMENT_BYTES, (file_offset % ALIGNMENT_BYTES as u64) as usize);
                assert!(length <= 1000, "a write of {length} bytes exceeds the capacity");
                file_offset += length as u64;
            }
        }
    }

    #[test]
    fn nothing_is_written_until_the_buffer_fills_or_is_written_out() {
        let mut sink = RecordingSink::default();
        let mut buffer = AlignedWriteBuffer::new(16, 3);
        buffer.append(&mut sink, &pattern(16, 1)).unwrap();
        assert!(sink.writes.is_empty());
        assert_eq!(buffer.buffered_bytes(), 16);
        buffer.append(&mut sink, &pattern(1, 2)).unwrap();
        assert_eq!(sink.writes.len(), 1);
        assert_eq!(buffer.buffered_bytes(), 1);
        buffer.write_out(&mut sink).unwrap();
        buffer.write_out(&mut sink).unwrap();
        assert_eq!(sink.writes.len(), 2, "an empty buffer writes nothing");
    }

    #[test]
    fn a_failed_write_is_reported() {
        let mut sink = RecordingSink { fail_next: true, ..RecordingSink::default() };
        let mut buffer = AlignedWriteBuffer::new(8, 0);
        buffer.append(&mut sink, &pattern(4, 1)).unwrap();
        assert!(buffer.write_out(&mut sink).is_err());
    }
}
