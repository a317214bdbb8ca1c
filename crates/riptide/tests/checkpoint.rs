//! Checkpoints (`Db::checkpoint`): an openable, consistent copy of a live database, taken while
//! writes go on, that survives a power loss once the call returns and never shares a byte that
//! the source goes on changing.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use riptide::fs::{FileSystem, MemFileSystem, PowerLossMode};
use riptide::{ColumnFamilyOptions, ConcurrencyMode, Db, Error, Options, ReadOptions, TransactionOptions, WriteBatch};

use common::{dump, dump_cf, key, small_options, value};

fn options(memory: &MemFileSystem) -> Options {
    // Values of 200 bytes and more go to blob files, so checkpoints carry those too.
    Options { min_blob_size_bytes: Some(200), ..small_options(Arc::new(memory.clone())) }
}

/// Writes keys `range` at `version`, every third value large enough for a blob file, into the
/// default column family and `family`.
fn write_range(db: &Db, family: &riptide::ColumnFamily, range: std::ops::Range<u64>, version: u64) {
    for number in range {
        let length_bytes = if number % 3 == 0 { 300 } else { 40 };
        let mut batch = WriteBatch::new();
        batch.put(&key(number), &value(number, version, length_bytes));
        batch.put_cf(family, &key(number), &value(number, version + 100, 20));
        db.write(batch).unwrap();
    }
}

#[test]
fn a_checkpoint_opens_with_the_contents_at_its_point_and_the_source_goes_on() {
    let memory = MemFileSystem::new();
    let db = Db::open("/source", options(&memory)).unwrap();
    let family = db.create_column_family("second", ColumnFamilyOptions::default()).unwrap();
    // Tables in several levels (flushes and compactions), blob files, and writes still only in
    // the log, some of them overwrites and deletes.
    write_range(&db, &family, 0..3_000, 1);
    db.flush().unwrap();
    write_range(&db, &family, 1_000..1_500, 2);
    for number in 2_000..2_100 {
        db.delete(&key(number)).unwrap();
    }
    // A range tombstone in the manifest (flushed) and one only in the log.
    db.delete_range(&key(2_200), &key(2_300)).unwrap();
    db.flush().unwrap();
    db.delete_range_cf(&family, &key(100), &key(150)).unwrap();
    let expected_default = dump(&db, &ReadOptions::default());
    let expected_second = dump_cf(&db, &family, &ReadOptions::default());
    assert!(db.stats().levels.iter().any(|level| level.files > 0), "tables exist");

    db.checkpoint("/checkpoint").unwrap();
    // The source goes on, and changes nothing in the checkpoint.
    write_range(&db, &family, 0..500, 3);
    db.compact_all().unwrap();
    drop(family);
    drop(db);

    let copy = Db::open("/checkpoint", options(&memory)).unwrap();
    assert_eq!(dump(&copy, &ReadOptions::default()), expected_default);
    let second = copy.column_family("second").expect("the column family is in the checkpoint");
    assert_eq!(dump_cf(&copy, &second, &ReadOptions::default()), expected_second);
    // The checkpoint is a database of its own: it takes writes and reopens.
    copy.put(b"new", b"in the checkpoint").unwrap();
    drop(second);
    drop(copy);
    let copy = Db::open("/checkpoint", options(&memory)).unwrap();
    assert_eq!(copy.get(b"new").unwrap(), Some(b"in the checkpoint".to_vec()));
    let source = Db::open("/source", options(&memory)).unwrap();
    assert_eq!(source.get(b"new").unwrap(), None);
    assert_eq!(source.get(&key(0)).unwrap(), Some(value(0, 3, 300)));
}

#[test]
fn a_checkpoint_survives_a_power_loss_once_taken() {
    let memory = MemFileSystem::new();
    let db = Db::open("/source", options(&memory)).unwrap();
    let family = db.create_column_family("second", ColumnFamilyOptions::default()).unwrap();
    // Unsynced writes only: the checkpoint's copies of the logs are synced, though the
    // source's logs are not.
    write_range(&db, &family, 0..400, 1);
    let expected = dump(&db, &ReadOptions::default());
    db.checkpoint("/checkpoint").unwrap();
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    drop(family);
    drop(db);
    let copy = Db::open("/checkpoint", options(&memory)).unwrap();
    assert_eq!(dump(&copy, &ReadOptions::default()), expected);
}

#[test]
fn a_checkpoint_taken_during_writes_holds_each_batch_wholly_or_not_at_all() {
    // Writers put atomic batches that set one counter key in two column families to the same
    // value; every batch acknowledged before the checkpoint must be in it, and no batch only
    // half.
    let memory = MemFileSystem::new();
    let db = Arc::new(Db::open("/source", options(&memory)).unwrap());
    let family = Arc::new(db.create_column_family("second", ColumnFamilyOptions::default()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let writers: Vec<_> = (0..4u64)
        .map(|writer| {
            let (db, family, stop, acknowledged) =
                (Arc::clone(&db), Arc::clone(&family), Arc::clone(&stop), Arc::clone(&acknowledged));
            thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let counter = format!("writer{writer}");
                    let mut batch = WriteBatch::new();
                    batch.put(counter.as_bytes(), round.to_string().as_bytes());
                    batch.put_cf(&family, counter.as_bytes(), round.to_string().as_bytes());
                    // Filler, so that memtables switch and flushes run during the checkpoint.
                    batch.put(&key(round * 4 + writer), &value(round, writer, 250));
                    db.write(batch).unwrap();
                    acknowledged[writer as usize].store(round, Ordering::Release);
                }
            })
        })
        .collect();
    thread::sleep(std::time::Duration::from_millis(50));
    let before: Vec<u64> = acknowledged.iter().map(|round| round.load(Ordering::Acquire)).collect();
    db.checkpoint("/checkpoint").unwrap();
    let after: Vec<u64> = acknowledged.iter().map(|round| round.load(Ordering::Acquire)).collect();
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let copy = Db::open("/checkpoint", options(&memory)).unwrap();
    let second = copy.column_family("second").unwrap();
    let read_round =
        |bytes: Option<Vec<u8>>| -> u64 { bytes.map_or(0, |bytes| String::from_utf8(bytes).unwrap().parse().unwrap()) };
    for writer in 0..4 {
        let counter = format!("writer{writer}");
        let in_default = read_round(copy.get(counter.as_bytes()).unwrap());
        let in_second = read_round(copy.get_cf(&second, counter.as_bytes()).unwrap());
        assert_eq!(in_default, in_second, "writer {writer}: half a batch in the checkpoint");
        assert!(
            (before[writer]..=after[writer] + 1).contains(&in_default),
            "writer {writer}: round {in_default} in the checkpoint, acknowledged {} before it and {} after it",
            before[writer],
            after[writer]
        );
    }
}

#[test]
fn a_checkpoint_refuses_an_existing_directory_a_closed_database_and_undecided_prepared_transactions() {
    let memory = MemFileSystem::new();
    let db = Db::open("/source", options(&memory)).unwrap();
    db.put(b"a", b"1").unwrap();
    db.checkpoint("/first").unwrap();
    assert!(matches!(db.checkpoint("/first"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.checkpoint("/source"), Err(Error::InvalidArgument(_))));

    let transaction =
        db.begin(&TransactionOptions { mode: ConcurrencyMode::Pessimistic, ..TransactionOptions::default() }).unwrap();
    transaction.put(b"b", b"2").unwrap();
    transaction.prepare(b"xid-1").unwrap();
    assert!(matches!(db.checkpoint("/second"), Err(Error::Busy(_))));
    assert!(!memory.exists(Path::new("/second/CURRENT")), "nothing openable is left behind");
    db.commit_prepared(b"xid-1").unwrap();
    db.checkpoint("/second").unwrap();
    drop(transaction);
    db.close().unwrap();
    let copy = Db::open("/second", options(&memory)).unwrap();
    let expected: BTreeMap<Vec<u8>, Vec<u8>> =
        [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())].into_iter().collect();
    assert_eq!(dump(&copy, &ReadOptions::default()), expected);
}

#[cfg(unix)]
#[test]
fn on_a_real_file_system_tables_are_hard_links() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let source_path = dir.path().join("source");
    let checkpoint_path = dir.path().join("checkpoint");
    let real_options = || Options { memtable_size_bytes: 64 << 10, ..Options::default() };
    let db = Db::open(&source_path, real_options()).unwrap();
    for number in 0..5_000 {
        db.put(&key(number), &value(number, 1, 50)).unwrap();
    }
    db.flush().unwrap();
    db.put(b"only in the log", b"yes").unwrap();
    db.checkpoint(&checkpoint_path).unwrap();
    let tables: Vec<_> = std::fs::read_dir(&checkpoint_path)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "sst"))
        .collect();
    assert!(!tables.is_empty());
    for table in &tables {
        assert!(std::fs::metadata(table).unwrap().nlink() >= 2, "{} is not a hard link", table.display());
    }
    let expected = dump(&db, &ReadOptions::default());
    db.close().unwrap();
    let copy = Db::open(&checkpoint_path, real_options()).unwrap();
    assert_eq!(dump(&copy, &ReadOptions::default()), expected);
    assert_eq!(copy.get(b"only in the log").unwrap(), Some(b"yes".to_vec()));
}

#[test]
fn an_io_error_at_any_step_fails_the_checkpoint_cleanly_and_the_next_one_succeeds() {
    use riptide::fs::{FaultFileSystem, FaultKind, FaultPlan};
    let memory = MemFileSystem::new();
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    let options = Options { min_blob_size_bytes: Some(200), ..small_options(Arc::new(fault.clone())) };
    let db = Db::open("/source", options.clone()).unwrap();
    let family = db.create_column_family("second", ColumnFamilyOptions::default()).unwrap();
    write_range(&db, &family, 0..300, 1);
    db.flush().unwrap();
    write_range(&db, &family, 100..150, 2);
    db.wait_for_background_work().unwrap();
    let expected = dump(&db, &ReadOptions::default());
    // How many operations (reads included) a checkpoint takes, then a failure at each of them.
    let before = fault.operation_count();
    db.checkpoint("/clean").unwrap();
    let steps = fault.operation_count() - before;
    assert!(steps > 10, "a checkpoint of tables, blob files and logs takes more than {steps} operations");
    for step in 1..=steps {
        let target = format!("/failed-{step}");
        fault.set_plan(Some(FaultPlan {
            fail_at_operation: fault.operation_count() + step,
            kind: FaultKind::Eio,
            persistent: false,
            include_reads: true,
        }));
        let result = db.checkpoint(&target);
        fault.set_plan(None);
        assert!(result.is_err(), "step {step}: the injected error was not reported");
        assert!(
            !memory.exists(Path::new(&format!("{target}/CURRENT"))),
            "step {step}: a failed checkpoint is openable"
        );
        // The source is unharmed and the next checkpoint succeeds.
        db.put(b"after", step.to_string().as_bytes()).unwrap();
        let next = format!("/next-{step}");
        db.checkpoint(&next).unwrap();
        let copy = Db::open(&next, options.clone()).unwrap();
        let mut contents = dump(&copy, &ReadOptions::default());
        assert_eq!(contents.remove(b"after".as_slice()), Some(step.to_string().into_bytes()), "step {step}");
        assert_eq!(contents, expected, "step {step}");
    }
}
