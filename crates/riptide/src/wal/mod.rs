//! The write-ahead log: a file of checksummed records, one record per write batch.
//!
//! A record is a 4-byte masked CRC32C over the length field and the payload, a 4-byte
//! little-endian payload length, then the payload (see `docs/format/wal.md`, format version 1).
//! A group commit appends several records with one write. The manifest reuses the same record
//! format, with one `VersionEdit` per record. Log files are named `NNNNNN.log`, the file number
//! in decimal, zero-padded to at least six digits (see `db::filename`).
//!
//! Concurrency contract: [`LogWriter`] and [`LogReader`] are single-owner values (`Send`, used
//! through `&mut self`); the engine serializes appends through the group-commit leader.
//!
//! Invariants: every record the writer appends has a non-empty payload of at most `u32::MAX`
//! bytes, so a zero-length record on disk is always damage; once a write, flush or sync has
//! failed, the writer refuses all further work, because nothing can be promised about the bytes
//! of the failed call and a later sync must not look as if it covered them. The reader never
//! panics, whatever the bytes, and does a bounded amount of work per file.

mod reader;
mod writer;

pub(crate) use reader::LogReader;
pub(crate) use writer::{encode_record, LogWriter};

/// Size of a record header: the 4-byte masked checksum and the 4-byte payload length.
pub(crate) const RECORD_HEADER_SIZE_BYTES: usize = 8;

/// Size of the checksum field that opens each record header.
const CHECKSUM_SIZE_BYTES: usize = 4;

/// The masked CRC32C of a record: over the 4 little-endian length bytes, then the payload.
fn record_checksum(length_bytes: [u8; 4], payload: &[u8]) -> u32 {
    crate::coding::mask_crc(crc32c::crc32c_append(crc32c::crc32c(&length_bytes), payload))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use crate::fs::{FileSystem, OsFileSystem, WritableFile};
    use crate::options::WalRecovery;
    use parking_lot::Mutex;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::path::PathBuf;
    use std::sync::Arc;

    /// Which operation of a [`SharedFile`] should fail next.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Fault {
        None,
        Append,
        Flush,
        Sync,
    }

    /// The bytes of a [`SharedFile`], shared with the test.
    type SharedBytes = Arc<Mutex<Vec<u8>>>;
    /// The switch that arms a [`SharedFile`]'s next failure.
    type FaultSwitch = Arc<Mutex<Fault>>;
    /// Records read back, as (offset, payload).
    type Records = Vec<(u64, Vec<u8>)>;

    /// A writable file over a shared vector, able to fail one chosen call once.
    struct SharedFile {
        bytes: SharedBytes,
        fault: FaultSwitch,
    }

    impl SharedFile {
        fn take_fault(&self, operation: Fault) -> Result<()> {
            let mut fault = self.fault.lock();
            if *fault == operation {
                *fault = Fault::None;
                return Err(Error::io("injected", std::io::Error::from_raw_os_error(5)));
            }
            Ok(())
        }
    }

    impl WritableFile for SharedFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            self.take_fault(Fault::Append)?;
            self.bytes.lock().extend_from_slice(data);
            Ok(())
        }

        fn flush(&mut self) -> Result<()> {
            self.take_fault(Fault::Flush)
        }

        fn sync(&mut self) -> Result<()> {
            self.take_fault(Fault::Sync)
        }

        fn len(&self) -> u64 {
            self.bytes.lock().len() as u64
        }
    }

    fn log_path() -> PathBuf {
        PathBuf::from("000042.log")
    }

    fn shared_writer() -> (LogWriter, SharedBytes, FaultSwitch) {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let fault = Arc::new(Mutex::new(Fault::None));
        let file = SharedFile { bytes: Arc::clone(&bytes), fault: Arc::clone(&fault) };
        (LogWriter::new(Box::new(file), log_path()), bytes, fault)
    }

    /// Payload `index`: varied lengths, including ones larger than a page.
    fn payload(index: usize) -> Vec<u8> {
        let length = match index % 4 {
            0 => 1,
            1 => 37,
            2 => 300,
            _ => 5000 + index,
        };
        (0..length).map(|position| (position * 31 + index * 7 + 1) as u8).collect()
    }

    /// Writes `count` records; returns the log bytes and each record's start offset.
    fn write_log(count: usize) -> (Vec<u8>, Vec<u64>) {
        let (mut writer, bytes, _) = shared_writer();
        let mut offsets = Vec::new();
        for index in 0..count {
            offsets.push(writer.size_bytes());
            writer.add_record(&payload(index)).expect("append");
        }
        writer.sync().expect("sync");
        let data = bytes.lock().clone();
        assert_eq!(writer.size_bytes(), data.len() as u64);
        (data, offsets)
    }

    /// Reads every record, or the first error.
    fn read_all(data: Vec<u8>, policy: WalRecovery, torn_tail_allowed: bool) -> (Result<Records>, LogReader) {
        read_records(LogReader::new(data, log_path(), policy, torn_tail_allowed))
    }

    /// Every record `reader` returns, or its first error.
    fn read_records(mut reader: LogReader) -> (Result<Records>, LogReader) {
        let mut records = Vec::new();
        loop {
            match reader.next_record() {
                Ok(Some((offset, payload))) => records.push((offset, payload.to_vec())),
                Ok(None) => return (Ok(records), reader),
                Err(error) => return (Err(error), reader),
            }
        }
    }

    fn expected_records(offsets: &[u64], skip: Option<usize>) -> Records {
        (0..offsets.len()).filter(|&index| Some(index) != skip).map(|index| (offsets[index], payload(index))).collect()
    }

    fn corruption_offset(result: Result<Records>) -> u64 {
        match result {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, log_path());
                offset
            }
            other => panic!("expected corruption, got {:?}", other.map(|records| records.len())),
        }
    }

    const ALL_POLICIES: [WalRecovery; 3] =
        [WalRecovery::TolerateTornTail, WalRecovery::Absolute, WalRecovery::SkipCorrupt];

    #[test]
    fn record_layout_is_byte_exact() {
        let (mut writer, bytes, _) = shared_writer();
        writer.add_record(b"abc").expect("append");
        let data = bytes.lock().clone();
        assert_eq!(data.len(), 11);
        assert_eq!(&data[4..8], &3u32.to_le_bytes());
        assert_eq!(&data[8..], b"abc");
        let expected = crate::coding::masked_crc(&[3, 0, 0, 0, b'a', b'b', b'c']);
        assert_eq!(&data[..4], &expected.to_le_bytes());
    }

    #[test]
    fn write_and_read_back_under_every_policy() {
        let (data, offsets) = write_log(40);
        for policy in ALL_POLICIES {
            for torn_tail_allowed in [true, false] {
                let (records, reader) = read_all(data.clone(), policy, torn_tail_allowed);
                assert_eq!(records.expect("clean log"), expected_records(&offsets, None));
                assert_eq!(reader.dropped_tail_bytes(), 0);
                assert_eq!(reader.skipped_records(), 0);
                assert_eq!(reader.valid_length_bytes(), data.len() as u64);
            }
        }
        let (records, _) = read_all(Vec::new(), WalRecovery::Absolute, false);
        assert!(records.expect("empty log").is_empty());
    }

    #[test]
    fn write_and_read_back_through_the_os_file_system() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("000007.log");
        let file_system = OsFileSystem;
        let mut writer = LogWriter::new(file_system.create(&path).expect("create"), path.clone());
        for index in 0..25 {
            writer.add_record(&payload(index)).expect("append");
            if index % 10 == 0 {
                writer.flush().expect("flush");
            }
        }
        writer.sync().expect("sync");
        let data = file_system.read_all(&path).expect("read");
        assert_eq!(data.len() as u64, writer.size_bytes());
        let mut reader = LogReader::new(data, path, WalRecovery::Absolute, true);
        let mut index = 0;
        while let Some((_, record)) = reader.next_record().expect("clean log") {
            assert_eq!(record, &payload(index)[..]);
            index += 1;
        }
        assert_eq!(index, 25);
    }

    #[test]
    fn encoded_records_are_the_bytes_add_record_writes() {
        // Self-service writers frame records themselves and one of them appends everyone's;
        // the file must hold exactly what record-by-record appends would, preallocated or not.
        let directory = tempfile::tempdir().expect("temporary directory");
        let file_system = OsFileSystem;
        let one_by_one_path = directory.path().join("000009.log");
        let mut one_by_one = LogWriter::new(file_system.create(&one_by_one_path).unwrap(), one_by_one_path.clone());
        let encoded_path = directory.path().join("000010.log");
        let mut encoded =
            LogWriter::with_preallocation(file_system.create(&encoded_path).unwrap(), encoded_path.clone(), 4096);
        encoded.sync().unwrap();
        let mut staged = Vec::new();
        for index in 0..30 {
            one_by_one.add_record(&payload(index)).unwrap();
            encode_record(&mut staged, &payload(index)).unwrap();
            if index % 4 == 3 {
                encoded.append_encoded_and_flush(&staged).unwrap();
                staged.clear();
            }
        }
        encoded.append_encoded_and_flush(&staged).unwrap();
        one_by_one.flush().unwrap();
        assert_eq!(encoded.size_bytes(), one_by_one.size_bytes());
        let expected = file_system.read_all(&one_by_one_path).unwrap();
        let written = file_system.read_all(&encoded_path).unwrap();
        assert_eq!(&written[..expected.len()], &expected[..]);
        assert!(written[expected.len()..].iter().all(|&byte| byte == 0), "preallocated zeros after the records");
        assert!(encode_record(&mut staged, &[]).is_err());
    }

    #[test]
    fn preallocated_log_through_the_os_file_system() {
        // Records buffered before, between and after preallocations land at their offsets, the
        // zeros past them, and the file's size on disk is whole chunks.
        let directory = tempfile::tempdir().expect("temporary directory");
        let path = directory.path().join("000008.log");
        let file_system = OsFileSystem;
        let chunk_bytes = 8192;
        let mut writer = LogWriter::with_preallocation(file_system.create(&path).unwrap(), path.clone(), chunk_bytes);
        writer.add_record(&payload(0)).unwrap();
        writer.sync().unwrap();
        for index in 1..40 {
            writer.add_record(&payload(index)).unwrap();
            if index % 7 == 0 {
                writer.sync().unwrap();
            }
        }
        writer.flush().unwrap();
        let data = file_system.read_all(&path).unwrap();
        assert_eq!(data.len() as u64 % chunk_bytes, 0);
        assert!(data.len() as u64 > writer.size_bytes());
        let mut reader = LogReader::new(data, path, WalRecovery::Absolute, true).allow_preallocated_tail();
        let mut index = 0;
        while let Some((_, record)) = reader.next_record().expect("clean log") {
            assert_eq!(record, &payload(index)[..]);
            index += 1;
        }
        assert_eq!(index, 40);
        assert!(reader.preallocated_tail_bytes() > 0);
    }

    #[test]
    fn torn_tail_at_every_truncation_point() {
        let (data, offsets) = write_log(6);
        let last_start = offsets[5] as usize;
        for cut in last_start + 1..data.len() {
            let torn = data[..cut].to_vec();
            let expected = expected_records(&offsets[..5], None);

            let (records, reader) = read_all(torn.clone(), WalRecovery::TolerateTornTail, true);
            assert_eq!(records.expect("torn tail is dropped"), expected, "cut at {cut}");
            assert_eq!(reader.dropped_tail_bytes(), (cut - last_start) as u64);
            assert_eq!(reader.valid_length_bytes(), last_start as u64);

            let (records, reader) = read_all(torn.clone(), WalRecovery::SkipCorrupt, false);
            assert_eq!(records.expect("skip drops the tail"), expected);
            assert_eq!(reader.dropped_tail_bytes(), (cut - last_start) as u64);

            let (records, _) = read_all(torn.clone(), WalRecovery::Absolute, true);
            assert_eq!(corruption_offset(records), last_start as u64);
            let (records, _) = read_all(torn, WalRecovery::TolerateTornTail, false);
            assert_eq!(corruption_offset(records), last_start as u64);
        }
    }

    #[test]
    fn torn_payload_with_full_length_is_dropped() {
        // The file grew to its full size but the last record's payload never reached the disk.
        let (mut data, offsets) = write_log(5);
        let last_start = offsets[4] as usize;
        data[last_start + RECORD_HEADER_SIZE_BYTES..].fill(0);
        let (records, reader) = read_all(data.clone(), WalRecovery::TolerateTornTail, true);
        assert_eq!(records.expect("torn tail"), expected_records(&offsets[..4], None));
        assert_eq!(reader.dropped_tail_bytes(), (data.len() - last_start) as u64);
        let (records, _) = read_all(data, WalRecovery::Absolute, true);
        assert_eq!(corruption_offset(records), last_start as u64);
    }

    #[test]
    fn flipped_byte_in_a_middle_record() {
        let (data, offsets) = write_log(7);
        let damaged = 2;
        let start = offsets[damaged] as usize;
        let end = offsets[damaged + 1] as usize;
        for position in start..end {
            for bit in [0, 7] {
                let mut garbled = data.clone();
                garbled[position] ^= 1 << bit;
                for policy in [WalRecovery::TolerateTornTail, WalRecovery::Absolute] {
                    for torn_tail_allowed in [true, false] {
                        let (records, _) = read_all(garbled.clone(), policy, torn_tail_allowed);
                        assert_eq!(corruption_offset(records), start as u64, "byte {position} bit {bit}");
                    }
                }
                let (records, reader) = read_all(garbled.clone(), WalRecovery::SkipCorrupt, true);
                assert_eq!(records.expect("skipped"), expected_records(&offsets, Some(damaged)), "byte {position}");
                assert_eq!(reader.skipped_records(), 1);
                assert_eq!(reader.skipped_bytes(), (end - start) as u64);
                assert_eq!(reader.dropped_tail_bytes(), 0);
            }
        }
    }

    #[test]
    fn errors_are_sticky() {
        let (mut data, offsets) = write_log(4);
        data[offsets[1] as usize + 9] ^= 0x10;
        let mut reader = LogReader::new(data, log_path(), WalRecovery::TolerateTornTail, true);
        assert!(reader.next_record().expect("first record is fine").is_some());
        assert!(reader.next_record().expect_err("damage").is_corruption());
        assert!(reader.next_record().expect_err("still damaged").is_corruption());
    }

    #[test]
    fn garbage_between_records_is_not_a_torn_tail() {
        let (data, offsets) = write_log(4);
        let insert_at = offsets[2] as usize;
        let mut garbled = data[..insert_at].to_vec();
        garbled.extend_from_slice(&[0xab; 13]);
        garbled.extend_from_slice(&data[insert_at..]);
        let (records, _) = read_all(garbled.clone(), WalRecovery::TolerateTornTail, true);
        assert_eq!(corruption_offset(records), insert_at as u64);
        let (records, reader) = read_all(garbled, WalRecovery::SkipCorrupt, true);
        let records = records.expect("skipped");
        assert_eq!(records.len(), 4);
        assert_eq!(records[2], (offsets[2] + 13, payload(2)));
        assert_eq!(reader.skipped_bytes(), 13);
    }

    #[test]
    fn zero_filled_and_garbage_tails() {
        let (data, offsets) = write_log(5);
        let mut rng = SmallRng::seed_from_u64(17);
        for tail_length in [1usize, 7, 8, 9, 100, 4096] {
            let zeros = vec![0u8; tail_length];
            let garbage: Vec<u8> = (0..tail_length).map(|_| rng.gen()).collect();
            for tail in [zeros, garbage] {
                let mut damaged = data.clone();
                damaged.extend_from_slice(&tail);
                let (records, reader) = read_all(damaged.clone(), WalRecovery::TolerateTornTail, true);
                assert_eq!(records.expect("tail dropped"), expected_records(&offsets, None));
                assert_eq!(reader.dropped_tail_bytes(), tail_length as u64);
                let (records, reader) = read_all(damaged.clone(), WalRecovery::SkipCorrupt, false);
                assert_eq!(records.expect("tail dropped"), expected_records(&offsets, None));
                assert_eq!(reader.dropped_tail_bytes(), tail_length as u64);
                let (records, _) = read_all(damaged.clone(), WalRecovery::Absolute, true);
                assert_eq!(corruption_offset(records), data.len() as u64);
                let (records, _) = read_all(damaged, WalRecovery::TolerateTornTail, false);
                assert_eq!(corruption_offset(records), data.len() as u64);
            }
        }
    }

    #[test]
    fn zero_length_record_is_damage() {
        let (data, offsets) = write_log(3);
        let mut damaged = data[..offsets[1] as usize].to_vec();
        let empty_start = damaged.len() as u64;
        damaged.extend_from_slice(&record_checksum([0; 4], &[]).to_le_bytes());
        damaged.extend_from_slice(&[0; 4]);
        damaged.extend_from_slice(&data[offsets[1] as usize..]);
        let (records, _) = read_all(damaged.clone(), WalRecovery::TolerateTornTail, true);
        assert_eq!(corruption_offset(records), empty_start);
        let (records, reader) = read_all(damaged, WalRecovery::SkipCorrupt, true);
        assert_eq!(records.expect("skipped").len(), 3);
        assert_eq!(reader.skipped_bytes(), 8);
    }

    #[test]
    fn exhausted_resync_budget_is_never_mistaken_for_a_torn_tail() {
        let (data, offsets) = write_log(8);
        let mut garbled = data.clone();
        garbled[offsets[1] as usize] ^= 1;
        let mut reader = LogReader::new(garbled.clone(), log_path(), WalRecovery::TolerateTornTail, true);
        reader.set_resync_budget_bytes(10);
        assert!(reader.next_record().expect("first record").is_some());
        assert!(reader.next_record().expect_err("cannot rule out later records").is_corruption());

        let mut reader = LogReader::new(garbled, log_path(), WalRecovery::SkipCorrupt, true);
        reader.set_resync_budget_bytes(10);
        assert!(reader.next_record().expect("first record").is_some());
        assert!(reader.next_record().expect("gives up").is_none());
        assert_eq!(reader.skipped_records(), 1);
        assert_eq!(reader.skipped_bytes(), data.len() as u64 - offsets[1]);
        assert_eq!(reader.dropped_tail_bytes(), 0);
    }

    #[test]
    fn randomized_damage_never_panics() {
        let (data, _) = write_log(12);
        let mut rng = SmallRng::seed_from_u64(0x00c0_ffee);
        for _ in 0..3000 {
            let mut garbled = data.clone();
            match rng.gen_range(0..4) {
                0 => garbled.truncate(rng.gen_range(0..data.len())),
                1 => {
                    for _ in 0..rng.gen_range(1..6) {
                        let position = rng.gen_range(0..garbled.len());
                        garbled[position] = rng.gen();
                    }
                }
                2 => {
                    let start = rng.gen_range(0..garbled.len());
                    let end = rng.gen_range(start..garbled.len().min(start + 64) + 1);
                    garbled[start..end].fill(0);
                }
                _ => garbled = (0..rng.gen_range(0..200)).map(|_| rng.gen_range(0..3)).collect(),
            }
            for policy in ALL_POLICIES {
                let (records, reader) = read_all(garbled.clone(), policy, rng.gen());
                if let Ok(records) = records {
                    let returned: u64 = records.iter().map(|(_, record)| (record.len() + 8) as u64).sum();
                    assert_eq!(returned + reader.skipped_bytes() + reader.dropped_tail_bytes(), garbled.len() as u64);
                }
            }
        }
    }

    #[test]
    fn writer_rejects_bad_payloads_without_poisoning() {
        let (mut writer, bytes, _) = shared_writer();
        assert!(matches!(writer.add_record(b""), Err(Error::InvalidArgument(_))));
        writer.add_record(b"fine").expect("append after a rejected argument");
        assert_eq!(bytes.lock().len(), 12);
    }

    #[test]
    fn writer_is_poisoned_by_any_failure() {
        for fault in [Fault::Append, Fault::Flush, Fault::Sync] {
            let (mut writer, bytes, fault_switch) = shared_writer();
            writer.add_record(b"before").expect("append");
            *fault_switch.lock() = fault;
            let first = match fault {
                Fault::Append => writer.add_record(b"failing"),
                Fault::Flush => writer.flush(),
                _ => writer.sync(),
            };
            assert!(first.expect_err("injected failure").is_io());
            assert_eq!(*fault_switch.lock(), Fault::None, "the fault fired once and the file works again");
            let length_after_failure = bytes.lock().len();
            assert!(writer.add_record(b"after").expect_err("poisoned").is_io());
            assert!(writer.flush().expect_err("poisoned").is_io());
            assert!(writer.sync().expect_err("poisoned").is_io());
            match writer.sync() {
                Err(Error::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(5)),
                other => panic!("expected the original I/O error, got {other:?}"),
            }
            assert_eq!(bytes.lock().len(), length_after_failure, "nothing is written once poisoned");
        }
    }

    /// A preallocating writer over a file of `memory` at `path`, with 4 KiB chunks.
    fn preallocating_writer(memory: &crate::fs::MemFileSystem, path: &std::path::Path) -> LogWriter {
        LogWriter::with_preallocation(memory.create(path).expect("create"), path.to_path_buf(), 4096)
    }

    /// [`read_all`] as recovery reads a write-ahead log: a preallocated tail allowed.
    fn read_wal(data: Vec<u8>, policy: WalRecovery) -> (Result<Records>, LogReader) {
        read_records(LogReader::new(data, log_path(), policy, true).allow_preallocated_tail())
    }

    #[test]
    fn preallocation_starts_with_the_first_sync_and_grows_by_chunks() {
        let memory = crate::fs::MemFileSystem::new();
        let path = PathBuf::from("/db/000007.log");
        memory.create_dir_all(std::path::Path::new("/db")).unwrap();
        let mut writer = preallocating_writer(&memory, &path);
        writer.add_record(&payload(1)).unwrap();
        writer.flush().unwrap();
        // Never synced: no zeros written.
        assert_eq!(memory.file_size(&path).unwrap(), writer.size_bytes());
        writer.sync().unwrap();
        let mut offsets = vec![0];
        for index in 2..12 {
            offsets.push(writer.size_bytes());
            writer.add_record(&payload(index)).unwrap();
            let file_size = memory.file_size(&path).unwrap();
            assert!(
                file_size >= writer.size_bytes() && file_size % 4096 == 0,
                "{file_size} for {}",
                writer.size_bytes()
            );
            assert!(file_size - writer.size_bytes() < 4096, "preallocated more than a chunk ahead");
        }
        writer.sync().unwrap();
        let data = memory.read_all(&path).unwrap();
        let written = writer.size_bytes() as usize;
        assert!(data.len() > written && data[written..].iter().all(|&byte| byte == 0));
        let expected: Records =
            offsets.iter().zip([1].into_iter().chain(2..12)).map(|(&offset, index)| (offset, payload(index))).collect();
        for policy in ALL_POLICIES {
            let (records, reader) = read_wal(data.clone(), policy);
            assert_eq!(records.expect("a preallocated tail is the end"), expected, "{policy:?}");
            assert_eq!(reader.preallocated_tail_bytes(), (data.len() - written) as u64);
            assert_eq!(reader.dropped_tail_bytes(), 0);
        }
        // The manifest's reader (no preallocated tail allowed) still calls the zeros damage.
        let (records, _) = read_all(data, WalRecovery::Absolute, true);
        assert_eq!(corruption_offset(records), written as u64);
    }

    #[test]
    fn preallocated_tails_with_torn_records_and_zero_ended_payloads() {
        let (data, offsets) = write_log(5);
        // A torn record before the zeros: dropped as a torn tail, the zeros are not part of it.
        let mut torn = data.clone();
        torn.extend_from_slice(&data[offsets[3] as usize..offsets[3] as usize + 20]);
        torn.extend_from_slice(&[0; 5000]);
        let (records, reader) = read_wal(torn.clone(), WalRecovery::TolerateTornTail);
        assert_eq!(records.unwrap(), expected_records(&offsets, None));
        assert_eq!((reader.dropped_tail_bytes(), reader.preallocated_tail_bytes()), (20, 5000));
        let (records, _) = read_wal(torn, WalRecovery::Absolute);
        assert_eq!(corruption_offset(records), data.len() as u64);
        // A valid last record whose payload ends in zeros, then zeros: every record is read.
        let (mut writer, bytes, _) = shared_writer();
        writer.add_record(b"first").unwrap();
        writer.add_record(&[7, 0, 0, 0, 0]).unwrap();
        let mut zero_ended = bytes.lock().clone();
        let written = zero_ended.len();
        zero_ended.extend_from_slice(&[0; 64]);
        let (records, reader) = read_wal(zero_ended, WalRecovery::Absolute);
        assert_eq!(records.unwrap(), vec![(0, b"first".to_vec()), (13, vec![7, 0, 0, 0, 0])]);
        assert_eq!(reader.preallocated_tail_bytes(), 64);
        assert_eq!(written, 26);
        // A lost page in the middle (zeros, then a valid record) is still corruption.
        let mut lost_page = data[..offsets[2] as usize].to_vec();
        lost_page.extend(std::iter::repeat_n(0u8, (offsets[3] - offsets[2]) as usize));
        lost_page.extend_from_slice(&data[offsets[3] as usize..]);
        lost_page.extend_from_slice(&[0; 4096]);
        let (records, _) = read_wal(lost_page, WalRecovery::TolerateTornTail);
        assert_eq!(corruption_offset(records), offsets[2]);
    }
}
