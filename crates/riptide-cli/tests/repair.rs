//! `repair DIR`: a damaged database is rebuilt from what can be read; the originals are kept
//! in `DIR/lost-<timestamp>/`, what was lost is listed, the result opens with `Db::open` and
//! passes `verify`, and no salvaged key has a wrong value.

mod common;

use std::path::{Path, PathBuf};

use common::{
    arg, corrupt_byte, database_in_tables, database_in_wal, files_with, key, options, run_expect, scratch, value,
};

fn lost_dirs(db: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(db)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.is_dir() && path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("lost-"))
        })
        .collect()
}

#[test]
fn a_damaged_table_and_log_are_salvaged_into_a_database_that_opens_and_verifies() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    {
        let database = riptide::Db::open(&db, options()).expect("open");
        database.create_column_family("users", riptide::ColumnFamilyOptions::default()).expect("create");
        let users = database.column_family("users").expect("users");
        for i in 400..450 {
            database.put(&key(i), &value(i, 1, 50)).expect("put");
            database.put_cf(&users, &key(i), b"user").expect("put");
        }
        database.delete(&key(0)).expect("delete");
        database.close().expect("close");
    }
    let table = files_with(&db, ".sst").into_iter().next().expect("a table");
    corrupt_byte(&table, 700);
    let log = files_with(&db, ".log").pop().expect("a log");
    let log_size = std::fs::metadata(&log).expect("size").len();
    corrupt_byte(&log, log_size / 2);
    run_expect(&["verify", &arg(&db)], 5);

    let run = run_expect(&["repair", &arg(&db)], 0);
    assert!(run.stdout.contains("moved ") && run.stdout.contains("lost ("), "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!("{}: bytes ", table.file_name().unwrap().to_string_lossy())),
        "{}",
        run.stdout
    );
    let lost = lost_dirs(&db);
    assert_eq!(lost.len(), 1);
    assert!(lost[0].join(table.file_name().unwrap()).exists(), "the originals are kept aside");

    run_expect(&["verify", &arg(&db), "--strict"], 0);
    let database = riptide::Db::open(&db, options()).expect("the repaired database opens");
    assert_eq!(database.get(&key(0)).expect("get"), None, "a delete stays a delete");
    let mut present = 0;
    for i in 1..450 {
        if let Some(found) = database.get(&key(i)).expect("get") {
            let expected = if i < 400 { value(i, 1, 60) } else { value(i, 1, 50) };
            assert_eq!(found, expected, "wrong value for key {i}");
            present += 1;
        }
    }
    assert!((300..449).contains(&present), "{present} keys survived one damaged block and one damaged record");
    let users = database.column_family("users").expect("the column family is rebuilt");
    assert!(database.get_cf(&users, &key(449)).expect("get").is_some() || run.stdout.contains(".log: bytes"));
}

#[test]
fn a_lost_current_is_rebuilt_from_the_newest_manifest() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 200);
    std::fs::remove_file(db.join("CURRENT")).expect("remove CURRENT");
    let run = run_expect(&["repair", &arg(&db)], 0);
    assert!(run.stdout.contains("column families taken from"), "{}", run.stdout);
    run_expect(&["verify", &arg(&db)], 0);
    assert_eq!(run_expect(&["scan", &arg(&db), "--count"], 0).stdout, "200\n");
}

#[test]
fn an_intact_database_loses_nothing() {
    let (_dir, db) = scratch();
    database_in_wal(&db, 30);
    let run = run_expect(&["repair", &arg(&db)], 0);
    assert!(run.stdout.contains("nothing was lost"), "{}", run.stdout);
    assert_eq!(run_expect(&["scan", &arg(&db), "--count"], 0).stdout, "30\n");
}

#[test]
fn nothing_to_repair_exits_3() {
    let (dir, db) = scratch();
    run_expect(&["repair", &arg(&db)], 3);
    run_expect(&["repair", &arg(dir.path())], 3);
}

#[test]
fn separated_values_are_salvaged_from_their_blob_files_and_damaged_ones_are_lost_not_wrong() {
    let (_dir, db) = scratch();
    let blob_options = riptide::Options { min_blob_size_bytes: Some(200), ..options() };
    {
        let database = riptide::Db::open(&db, blob_options.clone()).expect("open");
        for i in 0..40 {
            database.put(&key(i), &value(i, 1, 300)).expect("put");
        }
        database.flush().expect("flush");
        database.close().expect("close");
    }
    let blob = files_with(&db, ".blob").pop().expect("a blob file");
    // Damage the stored value of the first record (after 13 bytes of framing and the key; the
    // value is stored LZ4-compressed, the default).
    let file = riptide::internals::decode::blob_file(&std::fs::read(&blob).expect("read")).expect("decode");
    let first = &file.records[0];
    assert_eq!(first.key, key(0));
    corrupt_byte(&blob, first.offset + 13 + key(0).len() as u64 + first.stored.len() as u64 / 2);
    let run = run_expect(&["repair", &arg(&db)], 0);
    assert!(run.stdout.contains("blob record checksum mismatch"), "{}", run.stdout);
    let database = riptide::Db::open(&db, blob_options).expect("the repaired database opens");
    assert_eq!(database.get(&key(0)).expect("get"), None, "the damaged value is lost, not replaced");
    for i in 1..40 {
        assert_eq!(database.get(&key(i)).expect("get"), Some(value(i, 1, 300)), "key {i}");
    }
}

/// A range delete recorded in the manifest (flushed, kept alive by the data it still hides)
/// and one only in the log both stay in force after a repair, which rebuilds from tables and
/// logs: without them the deleted keys would come back.
#[test]
fn range_deletes_in_the_manifest_and_in_the_log_stay_in_force() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    {
        let database = riptide::Db::open(&db, options()).expect("open");
        // A snapshot keeps the covered keys in the tables through the flush, so the tombstone
        // is recorded in the manifest and still hides data there.
        let snapshot = database.snapshot();
        database.delete_range(&key(100), &key(150)).expect("delete_range");
        database.flush().expect("flush");
        drop(snapshot);
        database.delete_range(&key(300), &key(320)).expect("delete_range");
        database.put(&key(310), &value(310, 9, 50)).expect("put after the range delete");
        database.close().expect("close");
    }
    run_expect(&["repair", &arg(&db)], 0);
    let database = riptide::Db::open(&db, options()).expect("the repaired database opens");
    for i in 0..400 {
        let expected_absent = (100..150).contains(&i) || ((300..320).contains(&i) && i != 310);
        assert_eq!(database.get(&key(i)).expect("get").is_none(), expected_absent, "key {i}");
    }
    assert_eq!(database.get(&key(310)).expect("get"), Some(value(310, 9, 50)));
}

/// The story: repair kept, of each key, the newest version read and wrote back only plain puts,
/// so a put with an expiry came back as a delete and a merge operand as a delete too: a
/// counter kept with merges vanished. Now expiries are written back as they were, and the
/// operands newer than a key's last full version are written back over it, in order.
#[test]
fn expiries_and_merge_operands_survive_a_repair() {
    let (_dir, db) = scratch();
    let with_merges =
        || riptide::Options { merge_operator: Some(std::sync::Arc::new(riptide::U64AddOperator)), ..options() };
    let far_future = u64::MAX / 2;
    {
        let database = riptide::Db::open(&db, with_merges()).expect("open");
        database.put(b"counter", &40u64.to_le_bytes()).expect("put");
        database.merge(b"counter", &1u64.to_le_bytes()).expect("merge");
        let mut batch = riptide::WriteBatch::new();
        batch.put_with_expiry(b"session", b"alive", far_future);
        batch.put_with_expiry(b"stale", b"expired", 1);
        database.write(batch).expect("write");
        database.flush().expect("flush");
        // Operands in the log, over a counter in a table and over nothing.
        database.merge(b"counter", &1u64.to_le_bytes()).expect("merge");
        database.merge(b"fresh", &5u64.to_le_bytes()).expect("merge");
        database.delete(b"deleted").expect("delete");
        database.merge(b"deleted", &3u64.to_le_bytes()).expect("merge");
        database.close().expect("close");
    }
    run_expect(&["repair", &arg(&db)], 0);
    let database = riptide::Db::open(&db, with_merges()).expect("the repaired database opens");
    let counter = |key: &[u8]| {
        database.get(key).expect("get").map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    };
    assert_eq!(counter(b"counter"), Some(42));
    assert_eq!(counter(b"fresh"), Some(5));
    assert_eq!(counter(b"deleted"), Some(3));
    assert_eq!(database.get(b"session").expect("get"), Some(b"alive".to_vec()));
    assert_eq!(database.get(b"stale").expect("get"), None);
    // The expiry came back with the value: a clock past it reads the key as deleted.
    drop(database);
    let clock = std::sync::Arc::new(riptide::ManualClock::new(far_future));
    let later = riptide::Db::open(&db, riptide::Options { clock, ..with_merges() }).expect("open");
    assert_eq!(later.get(b"session").expect("get"), None);
}
