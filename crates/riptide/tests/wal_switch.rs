//! WAL durability across log switches (I12). A memtable switch starts a new log without syncing
//! the old one; a sync of the current log (a synced write, the interval thread, close) syncs the
//! closed logs first; a flush syncs them when several column families exist; and recovery
//! replays the longest intact prefix of the log history, stopping at a torn tail in any log or
//! at a gap in the sequence numbers, and dropping everything after it.
//!
//! Most tests keep flushes from finishing (table appends held at a gate until the power is cut),
//! so that every write stays in the logs and only the logs decide what survives a power loss.

mod common;
mod table_gate;

use std::path::Path;
use std::sync::Arc;

use riptide::fs::{MemFileSystem, PowerLossMode};
use riptide::{ColumnFamilyOptions, Db, Error, Options, ReadOptions, WalRecovery, WriteBatch, WriteOptions};

use common::{dump, dump_cf, key, small_options, value};
use table_gate::TableGate;

const PATH: &str = "/wal-switch";

/// Writes this many keys: at 16 KiB memtables, enough for several log switches.
const KEYS: u64 = 600;

fn options_over(file_system: Arc<dyn riptide::fs::FileSystem>) -> Options {
    // Room for every memtable of the test while no flush finishes.
    Options { max_immutable_memtables: 16, ..small_options(file_system) }
}

/// A database over `memory` whose flushes cannot finish during the test.
fn open_with_stuck_flushes(memory: &MemFileSystem) -> (Db, TableGate) {
    let gate = TableGate::new(Arc::new(memory.clone()));
    gate.hold();
    let db = Db::open(PATH, options_over(Arc::new(gate.clone()))).expect("open");
    (db, gate)
}

/// Writes keys `0..KEYS` without sync, one put each.
fn write_keys(db: &Db) {
    for number in 0..KEYS {
        db.put(&key(number), &value(number, 0, 100)).expect("put");
    }
}

/// The log files, oldest first.
fn log_names(memory: &MemFileSystem) -> Vec<String> {
    let mut names: Vec<String> = memory.file_names(PATH).into_iter().filter(|name| name.ends_with(".log")).collect();
    names.sort();
    names
}

/// Cuts the power while the database is open (its flushes held at the gate), then lets its
/// threads fail and stop. The gate then fails every table append: a flush released after the
/// power cut must write no table, as nothing runs after a real power cut.
///
/// Story: the gate was first simply opened here. Under load (two copies of the suite at once),
/// a second flush started between the release and the close, created a new table file after
/// the power cut (a handle of the new epoch, so its writes succeeded) and finished it, and
/// `durable_logs_without_tables` found a table (`make test-stress-suite`, run 6 of 10).
fn power_loss(db: Db, gate: &TableGate, memory: &MemFileSystem) {
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    gate.fail();
    drop(db);
}

/// The number of keys `0..n` the database holds, after checking they are exactly a prefix of
/// the keys written in order (nothing missing before a surviving key, nothing foreign).
fn surviving_prefix(db: &Db) -> u64 {
    let contents = dump(db, &ReadOptions::default());
    let count = contents.len() as u64;
    for number in 0..count {
        assert_eq!(
            contents.get(&key(number)),
            Some(&value(number, 0, 100)),
            "{count} keys survived, but not keys 0..{count}: a later write outlived an earlier one"
        );
    }
    count
}

#[test]
fn a_switch_does_not_sync_the_old_log_and_what_survives_is_a_prefix() {
    let memory = MemFileSystem::new();
    let (db, gate) = open_with_stuck_flushes(&memory);
    write_keys(&db);
    assert!(log_names(&memory).len() >= 3, "expected several log switches: {:?}", log_names(&memory));
    power_loss(db, &gate, &memory);
    let reopened = Db::open(PATH, options_over(Arc::new(memory.clone()))).expect("reopen");
    let survived = surviving_prefix(&reopened);
    assert!(survived < KEYS, "no write was synced, yet all {KEYS} survived: the switches synced the logs");
}

#[test]
fn a_synced_write_makes_every_closed_log_durable_too() {
    let memory = MemFileSystem::new();
    let (db, gate) = open_with_stuck_flushes(&memory);
    write_keys(&db);
    assert!(log_names(&memory).len() >= 3, "expected several log switches: {:?}", log_names(&memory));
    let mut batch = WriteBatch::new();
    batch.put(&key(KEYS), &value(KEYS, 0, 100));
    db.write_opt(batch, &WriteOptions { sync: true }).expect("synced write");
    power_loss(db, &gate, &memory);
    let reopened = Db::open(PATH, options_over(Arc::new(memory.clone()))).expect("reopen");
    assert_eq!(surviving_prefix(&reopened), KEYS + 1, "a synced write must keep every earlier write");
}

/// Story: a batch that spans column families lives in one log record. When one family's
/// memtable is flushed, recovery stops replaying that family's part from the logs; if the log
/// holding the other family's part was never synced, a power loss keeps the first part (in the
/// table) and loses the second. So a flush syncs the closed logs first when several column
/// families exist.
#[test]
fn a_flush_with_several_column_families_makes_the_closed_logs_durable_first() {
    let memory = MemFileSystem::new();
    let options = Options { memtable_size_bytes: 4 << 20, ..options_over(Arc::new(memory.clone())) };
    let mut small = ColumnFamilyOptions::default();
    small.memtable_size_bytes = 16 << 10;
    small.block_size_bytes = 512;
    let families = vec![("small".to_string(), small)];
    let db = Db::open_with_column_families(PATH, options.clone(), families.clone()).expect("open");
    let family = db.column_family("small").expect("family");
    // Batches over both families: enough to fill the small family's memtable several times
    // (each switch starts a new log, leaving the default family's part of every earlier batch
    // in closed, unsynced logs), never the default family's. Then the small family's flushes
    // finish, each made durable without a sync of the current log.
    const BATCHES: u64 = 400;
    for number in 0..BATCHES {
        let mut batch = WriteBatch::new();
        batch.put(&key(number), &value(number, 0, 100));
        batch.put_cf(&family, &key(number), &value(number, 1, 100));
        db.write_opt(batch, &WriteOptions::default()).expect("write");
    }
    db.wait_for_background_work().expect("flushes finish");
    let tables: Vec<usize> =
        db.stats().column_families.iter().map(|stats| stats.levels.iter().map(|level| level.files).sum()).collect();
    assert!(tables.iter().sum::<usize>() > 0, "the small column family never flushed: tables per family {tables:?}");
    assert!(log_names(&memory).len() >= 2, "expected a log switch: {:?}", log_names(&memory));
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    drop(family);
    drop(db);
    let reopened = Db::open_with_column_families(PATH, options, families).expect("reopen");
    let family = reopened.column_family("small").expect("family");
    let small_contents = dump_cf(&reopened, &family, &ReadOptions::default());
    let default_contents = dump(&reopened, &ReadOptions::default());
    assert!(!small_contents.is_empty(), "the flushed table of the small family must survive");
    for small_key in small_contents.keys() {
        assert!(
            default_contents.contains_key(small_key),
            "{} of {BATCHES} batches: a batch survived in the flushed family but not in the default one",
            small_contents.len()
        );
    }
}

/// Writes `KEYS` keys over several logs and syncs them all, then cuts the power: every log is
/// durable and complete, and no table exists. Returns the log names, oldest first.
fn durable_logs_without_tables(memory: &MemFileSystem) -> Vec<String> {
    let (db, gate) = open_with_stuck_flushes(memory);
    write_keys(&db);
    let mut batch = WriteBatch::new();
    batch.put(b"synced", b"");
    db.write_opt(batch, &WriteOptions { sync: true }).expect("synced write");
    power_loss(db, &gate, memory);
    let logs = log_names(memory);
    assert!(logs.len() >= 3, "expected several logs: {logs:?}");
    assert!(!memory.file_names(PATH).iter().any(|name| name.ends_with(".sst")), "a flush finished");
    logs
}

fn log_path(name: &str) -> String {
    format!("{PATH}/{name}")
}

fn log_size(memory: &MemFileSystem, name: &str) -> u64 {
    use riptide::fs::FileSystem;
    memory.file_size(Path::new(&log_path(name))).expect("log size")
}

#[test]
fn recovery_ends_the_history_at_a_torn_tail_in_an_older_log() {
    let memory = MemFileSystem::new();
    let logs = durable_logs_without_tables(&memory);
    let oldest = &logs[0];
    memory.truncate(log_path(oldest), log_size(&memory, oldest) - 5).expect("tear the oldest log");
    let reopened = Db::open(PATH, options_over(Arc::new(memory.clone()))).expect("reopen");
    let survived = surviving_prefix(&reopened);
    assert!(survived > 0 && survived < KEYS, "{survived} keys survived");
    let recovery = reopened.stats().recovery;
    assert_eq!(recovery.wal_logs_dropped, logs.len() as u64 - 1, "{recovery:?}");
    assert!(recovery.wal_torn_tail_bytes_dropped > 0, "{recovery:?}");
    // The dropped logs never come back, and the database goes on.
    reopened.put(b"after", b"recovery").expect("put");
    reopened.close().expect("close");
    let again = Db::open(PATH, options_over(Arc::new(memory.clone()))).expect("second reopen");
    assert_eq!(again.get(b"after").expect("get").as_deref(), Some(&b"recovery"[..]));
    assert_eq!(again.get(b"synced").expect("get"), None, "a write after the end of the history came back");
    assert_eq!(dump(&again, &ReadOptions::default()).len() as u64, survived + 1);
}

/// A log whose pages never reached the disk while a later log's did ends cleanly (empty here),
/// so only the sequence numbers show that writes are missing after it.
#[test]
fn recovery_ends_the_history_at_a_gap_in_the_sequence_numbers() {
    let memory = MemFileSystem::new();
    let logs = durable_logs_without_tables(&memory);
    memory.truncate(log_path(&logs[1]), 0).expect("empty the second log");
    let later_bytes: u64 = logs[2..].iter().map(|name| log_size(&memory, name)).sum();
    let reopened = Db::open(PATH, options_over(Arc::new(memory.clone()))).expect("reopen");
    let survived = surviving_prefix(&reopened);
    assert!(survived > 0 && survived < KEYS, "{survived} keys survived");
    let recovery = reopened.stats().recovery;
    assert_eq!(recovery.wal_logs_dropped, logs.len() as u64 - 3, "{recovery:?}");
    assert_eq!(recovery.wal_torn_tail_bytes_dropped, later_bytes, "{recovery:?}");
    assert_eq!(reopened.get(b"synced").expect("get"), None);
}

#[test]
fn absolute_recovery_refuses_a_torn_older_log_and_a_sequence_gap() {
    let absolute = |memory: &MemFileSystem| Options {
        wal_recovery: WalRecovery::Absolute,
        ..options_over(Arc::new(memory.clone()))
    };
    let torn = MemFileSystem::new();
    let logs = durable_logs_without_tables(&torn);
    torn.truncate(log_path(&logs[0]), log_size(&torn, &logs[0]) - 5).expect("tear");
    match Db::open(PATH, absolute(&torn)) {
        Err(Error::Corruption { file, .. }) => assert!(file.ends_with(&logs[0]), "{file:?}"),
        other => panic!("expected corruption in {}, got {:?}", logs[0], other.map(|_| ())),
    }
    let gap = MemFileSystem::new();
    let logs = durable_logs_without_tables(&gap);
    gap.truncate(log_path(&logs[1]), 0).expect("empty the second log");
    match Db::open(PATH, absolute(&gap)) {
        Err(Error::Corruption { file, reason, .. }) => {
            assert!(file.ends_with(&logs[2]), "{file:?}");
            assert!(reason.contains("writes are missing"), "{reason}");
        }
        other => panic!("expected corruption in {}, got {:?}", logs[2], other.map(|_| ())),
    }
}

/// The oldest log still needed came back empty while later logs survived: no record precedes
/// the first one replayed, so only the manifest's last sequence shows that writes are missing.
#[test]
fn recovery_ends_the_history_when_the_oldest_needed_log_lost_every_record() {
    let memory = MemFileSystem::new();
    let logs = durable_logs_without_tables(&memory);
    memory.truncate(log_path(&logs[0]), 0).expect("empty the oldest log");
    let later_bytes: u64 = logs[1..].iter().map(|name| log_size(&memory, name)).sum();
    let reopened = Db::open(PATH, options_over(Arc::new(memory.clone()))).expect("reopen");
    assert_eq!(surviving_prefix(&reopened), 0, "later writes survived the loss of the first ones");
    let recovery = reopened.stats().recovery;
    assert_eq!(recovery.wal_logs_dropped, logs.len() as u64 - 2, "{recovery:?}");
    assert_eq!(recovery.wal_torn_tail_bytes_dropped, later_bytes, "{recovery:?}");
}

/// Story: the first record replayed may not start past the manifest's last sequence plus one.
/// A flush used to record as last sequence the largest one of its own memtable, which is not
/// the largest in the logs it lets go: records of a column family dropped before its flush
/// stayed behind in such a log with larger sequences. The next log's first record then started
/// past the bound, and recovery took intact, synced writes for a gap and dropped them. A flush
/// now records every sequence assigned so far.
#[test]
fn records_of_a_dropped_column_family_in_an_old_log_are_no_gap() {
    let memory = MemFileSystem::new();
    let options = small_options(Arc::new(memory.clone()));
    let db = Db::open(PATH, options.clone()).expect("open");
    let doomed = db.create_column_family("doomed", ColumnFamilyOptions::default()).expect("create");
    for number in 0..10 {
        db.put(&key(number), &value(number, 0, 20)).expect("put");
    }
    for number in 0..50 {
        db.put_cf(&doomed, &key(number), &value(number, 1, 20)).expect("put_cf");
    }
    db.drop_column_family(&doomed).expect("drop");
    // Switches the default memtable to a new log and flushes it; the old log, holding the
    // dropped family's records after the default ones, is no longer needed.
    db.flush().expect("flush");
    for number in 10..20 {
        db.put(&key(number), &value(number, 0, 20)).expect("put");
    }
    let mut batch = WriteBatch::new();
    batch.put(&key(20), &value(20, 0, 20));
    db.write_opt(batch, &WriteOptions { sync: true }).expect("synced write");
    drop(doomed);
    db.close().expect("close");
    let reopened = Db::open(PATH, options).expect("reopen");
    let contents = dump(&reopened, &ReadOptions::default());
    for number in 0..=20 {
        assert_eq!(contents.get(&key(number)), Some(&value(number, 0, 20)), "key {number} lost");
    }
    assert_eq!(reopened.stats().recovery.wal_torn_tail_bytes_dropped, 0);
}
