//! Time to live (`Db::put_with_ttl`, `WriteBatch::put_with_expiry`, `ColumnFamilyOptions::ttl`):
//! an entry reads as deleted from its expiry on, in memtables and in tables, forward and
//! backward; a snapshot keeps the view of its read time; expiries are logged and replayed as
//! written; flush and compaction drop expired entries, and tables that have mostly expired are
//! compacted on their own. Time is a `ManualClock`, moved by the tests.

mod common;

use std::sync::Arc;
use std::time::Duration;

use riptide::fs::{MemFileSystem, PowerLossMode};
use riptide::{ColumnFamilyOptions, Db, ManualClock, Options, ReadOptions, WriteBatch};

use common::{dump, dump_cf, key, small_options, value};

/// The clock every test starts at: an arbitrary time in 2026, in microseconds.
const START_US: u64 = 1_790_000_000_000_000;

fn options_with_clock(memory: &MemFileSystem, clock: &Arc<ManualClock>) -> Options {
    Options { clock: clock.clone(), ..small_options(Arc::new(memory.clone())) }
}

/// The versions of `user_key` the database stores (memtables and tables).
fn stored_versions(db: &Db, user_key: &[u8]) -> usize {
    let family = db.default_column_family();
    riptide::internals::debug::key_versions(db, &family, user_key).expect("versions").1.len()
}

/// Keys `0..count` read backward, as key numbers.
fn backward_keys(db: &Db, options: &ReadOptions) -> Vec<Vec<u8>> {
    let mut iterator = db.iter(options).unwrap();
    iterator.seek_to_last();
    let mut keys = Vec::new();
    while iterator.valid() {
        keys.push(iterator.key().to_vec());
        iterator.prev();
    }
    iterator.status().unwrap();
    keys
}

#[test]
fn an_entry_reads_as_deleted_from_its_expiry_on_in_memtables_and_tables() {
    for flushed in [false, true] {
        let memory = MemFileSystem::new();
        let clock = Arc::new(ManualClock::new(START_US));
        let db = Db::open("/db", options_with_clock(&memory, &clock)).unwrap();
        for number in 0..40 {
            if number % 2 == 0 {
                db.put_with_ttl(&key(number), &value(number, 1, 30), Duration::from_secs(10)).unwrap();
            } else {
                db.put(&key(number), &value(number, 1, 30)).unwrap();
            }
        }
        if flushed {
            db.flush().unwrap();
        }
        assert_eq!(db.get(&key(4)).unwrap(), Some(value(4, 1, 30)), "flushed {flushed}");
        assert_eq!(dump(&db, &ReadOptions::default()).len(), 40);
        clock.advance(Duration::from_micros(9_999_999));
        assert_eq!(db.get(&key(4)).unwrap(), Some(value(4, 1, 30)), "one microsecond before the expiry");
        clock.advance(Duration::from_micros(1));
        assert_eq!(db.get(&key(4)).unwrap(), None, "at the expiry (flushed {flushed})");
        assert_eq!(db.get(&key(5)).unwrap(), Some(value(5, 1, 30)), "a put without expiry stays");
        let forward = dump(&db, &ReadOptions::default());
        let odd: Vec<Vec<u8>> = (0..40).filter(|number| number % 2 == 1).map(key).collect();
        assert_eq!(forward.keys().cloned().collect::<Vec<_>>(), odd, "flushed {flushed}");
        let expected: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
            (0..40).filter(|number| number % 2 == 1).map(|number| (key(number), value(number, 1, 30))).collect();
        assert_eq!(forward, expected, "values intact (flushed {flushed})");
        let mut backward = backward_keys(&db, &ReadOptions::default());
        backward.reverse();
        assert_eq!(backward, odd, "backward (flushed {flushed})");
    }
}

#[test]
fn an_expired_entry_hides_the_older_versions_of_its_key() {
    let memory = MemFileSystem::new();
    let clock = Arc::new(ManualClock::new(START_US));
    // Level 0 is compacted only when asked, so that the flushed tables are still there when the
    // test looks at them.
    let options = Options {
        level0_compaction_trigger_files: 100,
        level0_slowdown_writes_files: 200,
        level0_stop_writes_files: 300,
        ..options_with_clock(&memory, &clock)
    };
    let db = Db::open("/db", options).unwrap();
    db.put(b"k", b"permanent").unwrap();
    db.flush().unwrap();
    db.put_with_ttl(b"k", b"temporary", Duration::from_secs(1)).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"temporary".to_vec()));
    clock.advance(Duration::from_secs(1));
    assert_eq!(db.get(b"k").unwrap(), None, "the expired put deletes the key, the older value stays hidden");
    db.flush().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    // The flush wrote the expired put as the delete it reads as, without its value.
    let family = db.default_column_family();
    let versions = riptide::internals::debug::key_versions(&db, &family, b"k").unwrap().1;
    assert!(versions[0].is_delete && versions[0].value.is_empty(), "{versions:?}");
    db.compact_all().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    assert_eq!(stored_versions(&db, b"k"), 0, "compaction dropped the expired put and what it hid");
}

#[test]
fn a_snapshot_keeps_the_view_of_its_read_time_through_compactions() {
    let memory = MemFileSystem::new();
    let clock = Arc::new(ManualClock::new(START_US));
    let db = Db::open("/db", options_with_clock(&memory, &clock)).unwrap();
    for number in 0..200 {
        db.put_with_ttl(&key(number), &value(number, 1, 30), Duration::from_secs(5)).unwrap();
    }
    let snapshot = db.snapshot();
    assert_eq!(snapshot.read_time_us(), START_US);
    let at_snapshot = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
    let iterator_before = db.iter(&ReadOptions::default()).unwrap();
    clock.advance(Duration::from_secs(6));
    db.flush().unwrap();
    db.compact_all().unwrap();
    assert_eq!(db.get(&key(7)).unwrap(), None);
    assert!(dump(&db, &ReadOptions::default()).is_empty());
    assert_eq!(db.get_opt(&key(7), &at_snapshot).unwrap(), Some(value(7, 1, 30)), "the snapshot still sees it");
    assert_eq!(dump(&db, &at_snapshot).len(), 200);
    assert_eq!(common::entries(iterator_before).len(), 200, "an iterator reads as of its creation");
    assert_eq!(stored_versions(&db, &key(7)), 1, "kept for the snapshot");
    drop((snapshot, at_snapshot));
    db.compact_all().unwrap();
    assert_eq!(stored_versions(&db, &key(7)), 0, "gone once no reader could see it");
}

#[test]
fn expiries_are_logged_as_written_and_survive_a_crash() {
    let memory = MemFileSystem::new();
    let clock = Arc::new(ManualClock::new(START_US));
    let options = Options { ttl: Some(Duration::from_secs(10)), ..options_with_clock(&memory, &clock) };
    {
        let db = Db::open("/db", options.clone()).unwrap();
        db.put(b"by-ttl", b"1").unwrap();
        let mut batch = WriteBatch::new();
        batch.put_with_expiry(b"explicit", b"2", START_US + 3_000_000);
        db.write_opt(batch, &riptide::WriteOptions { sync: true }).unwrap();
        // Lost at the power loss below: no expiry may come back for it.
    }
    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
    // Five seconds later the replayed puts keep their expiries: the column family's ttl is not
    // applied again at the replay, so "by-ttl" still expires ten seconds after it was written.
    clock.advance(Duration::from_secs(5));
    let db = Db::open("/db", options.clone()).unwrap();
    assert_eq!(db.get(b"by-ttl").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"explicit").unwrap(), None, "expired at 3 s");
    clock.advance(Duration::from_secs(5));
    assert_eq!(db.get(b"by-ttl").unwrap(), None, "expired at 10 s after its write, not after the reopen");
    drop(db);
    // Without a ttl, puts are plain again; the ones written with it keep their expiry.
    let db = Db::open("/db", Options { ttl: None, ..options }).unwrap();
    db.put(b"plain", b"3").unwrap();
    clock.advance(Duration::from_secs(1000));
    assert_eq!(db.get(b"plain").unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.get(b"by-ttl").unwrap(), None);
}

#[test]
fn a_column_family_ttl_covers_batches_and_transactions_of_that_family_only() {
    let memory = MemFileSystem::new();
    let clock = Arc::new(ManualClock::new(START_US));
    let db = Db::open("/db", options_with_clock(&memory, &clock)).unwrap();
    let mut session_options = db.column_family_options(&db.default_column_family()).unwrap();
    session_options.ttl = Some(Duration::from_secs(60));
    let sessions = db.create_column_family("sessions", session_options).unwrap();
    let mut batch = WriteBatch::new();
    batch.put_cf(&sessions, b"s1", b"alice");
    batch.put(b"user", b"alice");
    batch.put_with_expiry_cf(&sessions, b"s2", b"bob", START_US + 120_000_000);
    db.write(batch).unwrap();
    let transaction = db.begin(&riptide::TransactionOptions::default()).unwrap();
    transaction.put_cf(&sessions, b"s3", b"carol").unwrap();
    transaction.commit().unwrap();
    clock.advance(Duration::from_secs(59));
    assert_eq!(dump_cf(&db, &sessions, &ReadOptions::default()).len(), 3);
    clock.advance(Duration::from_secs(1));
    let left = dump_cf(&db, &sessions, &ReadOptions::default());
    assert_eq!(left.keys().cloned().collect::<Vec<_>>(), vec![b"s2".to_vec()], "an explicit expiry wins");
    assert_eq!(db.get(b"user").unwrap(), Some(b"alice".to_vec()), "the default family has no ttl");
    // A ttl set later applies to later puts.
    let mut options = db.column_family_options(&db.default_column_family()).unwrap();
    options.ttl = Some(Duration::from_secs(1));
    db.set_column_family_options(&db.default_column_family(), options).unwrap();
    db.put(b"later", b"x").unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(db.get(b"later").unwrap(), None);
    assert_eq!(db.get(b"user").unwrap(), Some(b"alice".to_vec()));
}

#[test]
fn tables_whose_entries_have_mostly_expired_are_compacted_on_their_own() {
    let memory = MemFileSystem::new();
    let clock = Arc::new(ManualClock::new(START_US));
    let db = Db::open("/db", options_with_clock(&memory, &clock)).unwrap();
    for number in 0..3000 {
        // Expiries spread over 100 to 400 seconds.
        let ttl = Duration::from_secs(100 + number / 10);
        db.put_with_ttl(&key(number), &value(number, 1, 40), ttl).unwrap();
    }
    db.compact_all().unwrap();
    let files_before: usize = db.level_file_counts().iter().sum();
    assert!(files_before > 1, "{files_before} tables");
    assert_eq!(db.stats().expiry_compactions, 0);
    clock.advance(Duration::from_secs(500));
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(stats.expiry_compactions >= 1, "{stats}");
    assert_eq!(db.level_file_counts().iter().sum::<usize>(), 0, "every table expired whole and went");
    assert!(dump(&db, &ReadOptions::default()).is_empty());
}

#[test]
fn bad_ttls_and_short_expiring_values_are_rejected() {
    let memory = MemFileSystem::new();
    let db = Db::open("/db", small_options(Arc::new(memory.clone()))).unwrap();
    assert!(matches!(db.put_with_ttl(b"k", b"v", Duration::ZERO), Err(riptide::Error::InvalidArgument(_))));
    let mut zero_ttl = ColumnFamilyOptions::default();
    zero_ttl.ttl = Some(Duration::ZERO);
    assert!(matches!(db.create_column_family("zero", zero_ttl), Err(riptide::Error::InvalidArgument(_))));
    // A put with an expiry whose stored value is shorter than the expiry is corruption.
    let mut batch = WriteBatch::new();
    batch.put_with_expiry(b"k", b"v", 5);
    let mut bytes = riptide::internals::decode::write_batch_bytes(&batch);
    let value_length_at = bytes.len() - 1 - 8 - 1;
    bytes[value_length_at] = 4;
    bytes.truncate(value_length_at + 1 + 4);
    assert!(matches!(riptide::internals::decode::write_batch(&bytes), Err(riptide::Error::Corruption { .. })));
}
