//! Prepared transactions on disk: one file per prepared transaction (`NNNNNN.txn`), holding its
//! xid, its write batch and what must stay protected until it is decided.
//!
//! Two-phase commit: `prepare` makes a transaction durable but invisible. Its file is written,
//! synced, and its name made durable before `prepare` returns; the transaction keeps its locks
//! and a guard in the commit history (its written keys, and under SERIALIZABLE its read keys and
//! ranges, on which other transactions' commits now fail), so that its commit, decided later,
//! cannot fail. `commit_prepared` writes the batch to the WAL together with a marker record that
//! names the file's number (a put into the reserved column family [`MARKER_COLUMN_FAMILY_ID`],
//! which no memtable takes), syncs it, and only then deletes the file. Recovery lists the files,
//! drops those whose marker it replayed from the WAL (committed, the deletion lost to the
//! crash), and recovers the others as prepared: locks taken again, guard in place, listed by
//! `Db::prepared_transactions`. While a commit is between its WAL record and the deletion, the
//! log it went to is pinned (`TransactionShared::pin_log`), so the marker outlives the file.
//! `rollback_prepared` only deletes the file (durably).
//!
//! A transaction whose writes were spilled (`spill.rs`) keeps them in its runs: its file lists
//! the runs instead of holding a batch (format version 2), the runs are synced before the file
//! is written, and its commit is the manifest record that installs its tables, which names the
//! transaction (tag 14 of `docs/format/manifest.md`), so recovery reads the decision from the
//! manifest instead of a WAL marker (I32).
//!
//! The byte format is in `docs/format/prepared_transaction.md` (versions 1 and 2); decoding
//! checks the checksum and every length. A file that fails the check was being written when the process
//! died (its `prepare` never returned) and is dropped; recovery counts it.
//!
//! Concurrency contract: plain functions; callers serialize per transaction.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use crate::coding::{
    get_length_prefixed, get_varint32, get_varint64, masked_crc, put_length_prefixed, put_varint32, put_varint64,
    read_u32,
};
use crate::error::Result;
use crate::fs::FileSystem;

use super::history::KeyRange;

/// The column family id of commit markers: no column family gets it (ids are assigned upwards
/// from 1), so recovery and the write path skip its records when inserting.
pub(crate) const MARKER_COLUMN_FAMILY_ID: u32 = u32::MAX;

/// First bytes of every prepared-transaction file.
const MAGIC: &[u8; 8] = b"RPTDTXN\x01";

/// Format version of a transaction whose writes are all in its batch.
const FORMAT_VERSION_BATCH: u32 = 1;

/// Format version of a transaction whose writes were spilled: version 1 plus the list of its
/// runs. Written only for such transactions, so that files a version-1 reader could decide stay
/// readable by it.
const FORMAT_VERSION_SPILLED: u32 = 2;

/// The longest accepted xid (MariaDB's XID is at most 128 bytes of gtrid and bqual plus its
/// format id).
pub(crate) const MAX_XID_BYTES: usize = 256;

/// The file name of prepared transaction `number`.
pub(crate) fn prepared_file_name(number: u64) -> String {
    format!("{number:06}.txn")
}

/// The path of prepared transaction `number` in `dir`.
pub(crate) fn prepared_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(prepared_file_name(number))
}

/// The key of the marker record that commits prepared transaction `number`.
pub(crate) fn marker_key(number: u64) -> [u8; 8] {
    number.to_be_bytes()
}

/// A prepared transaction as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PreparedRecord {
    pub(crate) number: u64,
    pub(crate) xid: Vec<u8>,
    /// The encoded write batch (sequence 0).
    pub(crate) batch: Vec<u8>,
    /// Keys the guard protects against writes: (column family, key, written by the
    /// transaction). Written keys are also locked again after recovery.
    pub(crate) keys: Vec<(u32, Vec<u8>, bool)>,
    pub(crate) ranges: Vec<KeyRange>,
    /// A spilled transaction's writes (its batch is then empty): its runs, oldest layer first.
    pub(crate) runs: Vec<PreparedRun>,
}

/// One spilled run of a prepared transaction: the `NNNNNN.spill` file holding the writes of
/// one layer in one column family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PreparedRun {
    /// The layer id its entries carry where a sequence number would be.
    pub(crate) layer: u64,
    pub(crate) column_family: u32,
    pub(crate) file_number: u64,
}

fn put_bound(out: &mut Vec<u8>, bound: &Bound<Vec<u8>>) {
    match bound {
        Bound::Unbounded => out.push(0),
        Bound::Included(key) => {
            out.push(1);
            put_length_prefixed(out, key);
        }
        Bound::Excluded(key) => {
            out.push(2);
            put_length_prefixed(out, key);
        }
    }
}

/// Encodes `record` (see the format document).
pub(crate) fn encode(record: &PreparedRecord) -> Vec<u8> {
    let mut body = Vec::with_capacity(record.batch.len() + 64);
    body.extend_from_slice(MAGIC);
    let version = if record.runs.is_empty() { FORMAT_VERSION_BATCH } else { FORMAT_VERSION_SPILLED };
    put_varint32(&mut body, version);
    put_varint64(&mut body, record.number);
    put_length_prefixed(&mut body, &record.xid);
    put_length_prefixed(&mut body, &record.batch);
    put_varint64(&mut body, record.keys.len() as u64);
    for (column_family, key, written) in &record.keys {
        put_varint32(&mut body, *column_family);
        put_length_prefixed(&mut body, key);
        body.push(u8::from(*written));
    }
    put_varint64(&mut body, record.ranges.len() as u64);
    for range in &record.ranges {
        put_varint32(&mut body, range.column_family);
        put_bound(&mut body, &range.start);
        put_bound(&mut body, &range.end);
    }
    if version == FORMAT_VERSION_SPILLED {
        put_varint64(&mut body, record.runs.len() as u64);
        for run in &record.runs {
            put_varint64(&mut body, run.layer);
            put_varint32(&mut body, run.column_family);
            put_varint64(&mut body, run.file_number);
        }
    }
    let checksum = masked_crc(&body);
    body.extend_from_slice(&checksum.to_le_bytes());
    body
}

/// A cursor over the body, failing with the offset of the damage.
struct Reader<'a> {
    data: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn fail<T>(&self, what: &str) -> std::result::Result<T, (u64, String)> {
        Err((self.offset as u64, format!("{what} is malformed or runs past the end")))
    }

    fn varint64(&mut self, what: &str) -> std::result::Result<u64, (u64, String)> {
        match get_varint64(self.data.get(self.offset..).unwrap_or_default()) {
            Some((value, length)) => {
                self.offset += length;
                Ok(value)
            }
            None => self.fail(what),
        }
    }

    fn varint32(&mut self, what: &str) -> std::result::Result<u32, (u64, String)> {
        match get_varint32(self.data.get(self.offset..).unwrap_or_default()) {
            Some((value, length)) => {
                self.offset += length;
                Ok(value)
            }
            None => self.fail(what),
        }
    }

    fn bytes(&mut self, what: &str) -> std::result::Result<&'a [u8], (u64, String)> {
        match get_length_prefixed(self.data.get(self.offset..).unwrap_or_default()) {
            Some((bytes, length)) => {
                self.offset += length;
                Ok(bytes)
            }
            None => self.fail(what),
        }
    }

    fn byte(&mut self, what: &str) -> std::result::Result<u8, (u64, String)> {
        match self.data.get(self.offset) {
            Some(&byte) => {
                self.offset += 1;
                Ok(byte)
            }
            None => self.fail(what),
        }
    }

    fn bound(&mut self) -> std::result::Result<Bound<Vec<u8>>, (u64, String)> {
        match self.byte("range bound kind")? {
            0 => Ok(Bound::Unbounded),
            1 => Ok(Bound::Included(self.bytes("range bound key")?.to_vec())),
            2 => Ok(Bound::Excluded(self.bytes("range bound key")?.to_vec())),
            other => Err((self.offset as u64 - 1, format!("unknown range bound kind {other}"))),
        }
    }

    /// A count of items that each take at least `min_item_bytes`, checked against what is left
    /// so that damage cannot ask for a huge allocation.
    fn count(&mut self, what: &str, min_item_bytes: usize) -> std::result::Result<usize, (u64, String)> {
        let count = self.varint64(what)?;
        let left = self.data.len().saturating_sub(self.offset);
        if count > (left / min_item_bytes) as u64 {
            return Err((self.offset as u64, format!("{what} {count} exceeds what the file holds")));
        }
        Ok(count as usize)
    }
}

/// Decodes a file's bytes; `Err((offset, reason))` when they are damaged or incomplete.
pub(crate) fn decode(data: &[u8]) -> std::result::Result<PreparedRecord, (u64, String)> {
    if data.len() < MAGIC.len() + 4 {
        return Err((0, format!("file of {} bytes is too short", data.len())));
    }
    let body_length = data.len() - 4;
    let stored = read_u32(data, body_length).unwrap_or_default();
    if masked_crc(&data[..body_length]) != stored {
        return Err((body_length as u64, "checksum mismatch".to_string()));
    }
    if &data[..MAGIC.len()] != MAGIC {
        return Err((0, "not a prepared-transaction file (bad magic)".to_string()));
    }
    let mut reader = Reader { data: &data[..body_length], offset: MAGIC.len() };
    let version = reader.varint32("format version")?;
    if version != FORMAT_VERSION_BATCH && version != FORMAT_VERSION_SPILLED {
        return Err((MAGIC.len() as u64, format!("unsupported format version {version}")));
    }
    let number = reader.varint64("file number")?;
    let xid = reader.bytes("xid")?.to_vec();
    if xid.is_empty() || xid.len() > MAX_XID_BYTES {
        return Err((reader.offset as u64, format!("xid of {} bytes is out of range", xid.len())));
    }
    let batch = reader.bytes("write batch")?.to_vec();
    let key_count = reader.count("key count", 3)?;
    let mut keys = Vec::with_capacity(key_count);
    for _ in 0..key_count {
        let column_family = reader.varint32("key column family")?;
        let key = reader.bytes("key")?.to_vec();
        let written = match reader.byte("key flag")? {
            0 => false,
            1 => true,
            other => return Err((reader.offset as u64 - 1, format!("key flag {other} is neither 0 nor 1"))),
        };
        keys.push((column_family, key, written));
    }
    let range_count = reader.count("range count", 3)?;
    let mut ranges = Vec::with_capacity(range_count);
    for _ in 0..range_count {
        let column_family = reader.varint32("range column family")?;
        let start = reader.bound()?;
        let end = reader.bound()?;
        ranges.push(KeyRange { column_family, start, end });
    }
    let mut runs = Vec::new();
    if version == FORMAT_VERSION_SPILLED {
        let run_count = reader.count("run count", 3)?;
        if run_count == 0 {
            return Err((reader.offset as u64, "a spilled transaction without runs".to_string()));
        }
        for _ in 0..run_count {
            let layer = reader.varint64("run layer")?;
            let column_family = reader.varint32("run column family")?;
            let file_number = reader.varint64("run file number")?;
            runs.push(PreparedRun { layer, column_family, file_number });
        }
        if !batch.is_empty() {
            return Err((reader.offset as u64, "a spilled transaction with a write batch".to_string()));
        }
    }
    if reader.offset != body_length {
        return Err((reader.offset as u64, "bytes after the last field".to_string()));
    }
    Ok(PreparedRecord { number, xid, batch, keys, ranges, runs })
}

/// Writes `record` to its file and makes it and its name durable.
pub(crate) fn write(file_system: &dyn FileSystem, dir: &Path, record: &PreparedRecord) -> Result<()> {
    let path = prepared_path(dir, record.number);
    let mut file = file_system.create(&path)?;
    file.append(&encode(record))?;
    file.sync()?;
    drop(file);
    file_system.sync_dir(dir)
}

/// Deletes prepared transaction `number`'s file, durably.
pub(crate) fn remove(file_system: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    file_system.remove(&prepared_path(dir, number))?;
    file_system.sync_dir(dir)
}

/// Reads and decodes the file of prepared transaction `number`: `Ok(None)` when it is damaged
/// (an unfinished prepare), with the reason.
pub(crate) fn read(
    file_system: &dyn FileSystem,
    dir: &Path,
    number: u64,
) -> Result<std::result::Result<PreparedRecord, String>> {
    let path = prepared_path(dir, number);
    let data = file_system.read_all(&path)?;
    Ok(match decode(&data) {
        Ok(record) if record.number == number => Ok(record),
        Ok(record) => Err(format!("file names transaction {} but is named {number}", record.number)),
        Err((offset, reason)) => Err(format!("{} at offset {offset}: {reason}", path.display())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PreparedRecord {
        PreparedRecord {
            number: 42,
            xid: b"gtrid-1.bqual".to_vec(),
            batch: vec![0; 12],
            keys: vec![(0, b"written".to_vec(), true), (3, b"read".to_vec(), false)],
            ranges: vec![
                KeyRange {
                    column_family: 0,
                    start: Bound::Included(b"a".to_vec()),
                    end: Bound::Excluded(b"m".to_vec()),
                },
                KeyRange { column_family: 3, start: Bound::Unbounded, end: Bound::Unbounded },
            ],
            runs: Vec::new(),
        }
    }

    fn spilled_sample() -> PreparedRecord {
        PreparedRecord {
            batch: Vec::new(),
            runs: vec![
                PreparedRun { layer: 1, column_family: 0, file_number: 17 },
                PreparedRun { layer: 2, column_family: 3, file_number: 300 },
            ],
            ..sample()
        }
    }

    #[test]
    fn round_trip() {
        for record in [sample(), spilled_sample()] {
            assert_eq!(decode(&encode(&record)).unwrap(), record);
        }
        // A transaction without runs keeps version 1, which older readers decode.
        assert_eq!(encode(&sample())[MAGIC.len()], 1);
        assert_eq!(encode(&spilled_sample())[MAGIC.len()], 2);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_rejected() {
        for record in [sample(), spilled_sample()] {
            let bytes = encode(&record);
            for length in 0..bytes.len() {
                assert!(decode(&bytes[..length]).is_err(), "truncated to {length}");
            }
            for position in 0..bytes.len() {
                let mut damaged = bytes.clone();
                damaged[position] ^= 0x40;
                assert!(decode(&damaged).is_err(), "flipped byte {position}");
            }
        }
    }
}
