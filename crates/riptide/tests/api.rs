//! The public API's contracts: opening and locking, option and limit checks, batches,
//! snapshots, iterator edge cases, and concurrent use.

mod common;

use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

use common::{dump, key, small_options, value};

fn memory_db() -> (MemFileSystem, Db) {
    let memory = MemFileSystem::new();
    let db = Db::open("/api", small_options(Arc::new(memory.clone()))).expect("open");
    (memory, db)
}

#[test]
fn second_open_is_busy_and_close_releases_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let error = Db::open(dir.path(), Options::default()).expect_err("second open");
    assert!(matches!(error, Error::Busy(_)), "{error}");
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("open after close");
    drop(db);
    Db::open(dir.path(), Options::default()).expect("open after drop");
}

#[test]
fn create_if_missing_and_error_if_exists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let error = Db::open(&path, Options { create_if_missing: false, ..Options::default() }).expect_err("missing");
    assert!(matches!(error, Error::InvalidArgument(_)), "{error}");
    Db::open(&path, Options::default()).expect("create").close().expect("close");
    let error = Db::open(&path, Options { error_if_exists: true, ..Options::default() }).expect_err("exists");
    assert!(matches!(error, Error::InvalidArgument(_)), "{error}");
}

#[test]
fn invalid_options_are_rejected_before_anything_is_written() {
    let memory = MemFileSystem::new();
    for options in [
        Options { memtable_size_bytes: 10, ..small_options(Arc::new(memory.clone())) },
        Options { block_size_bytes: 10, ..small_options(Arc::new(memory.clone())) },
        Options { block_restart_interval: 0, ..small_options(Arc::new(memory.clone())) },
        Options { max_key_size_bytes: 0, ..small_options(Arc::new(memory.clone())) },
        Options { level0_stop_writes_files: 1, ..small_options(Arc::new(memory.clone())) },
        Options { level_size_ratio: 1, ..small_options(Arc::new(memory.clone())) },
        Options { max_memory_bytes: 1 << 20, ..small_options(Arc::new(memory.clone())) },
        Options {
            compression_per_level: vec![riptide::Compression::None; 65],
            ..small_options(Arc::new(memory.clone()))
        },
    ] {
        let error = Db::open("/invalid", options).expect_err("invalid");
        assert!(matches!(error, Error::InvalidArgument(_)), "{error}");
    }
    assert!(memory.file_names("/invalid").is_empty());
}

#[test]
fn limits_are_checked_before_writing() {
    let memory = MemFileSystem::new();
    let options = Options {
        max_key_size_bytes: 16,
        max_value_size_bytes: 100,
        max_batch_size_bytes: 1000,
        ..small_options(Arc::new(memory.clone()))
    };
    let db = Db::open("/limits", options).expect("open");
    assert!(matches!(db.put(&[b'k'; 17], b"v"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.put(b"k", &[0u8; 101]), Err(Error::InvalidArgument(_))));
    let mut batch = WriteBatch::new();
    for i in 0..20u64 {
        batch.put(&key(i), &[0u8; 90]);
    }
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 0, "a rejected write left data behind");
    db.put(&[b'k'; 16], &[1u8; 100]).expect("at the limits");
    db.put(b"", b"empty key").expect("empty keys are allowed");
    assert_eq!(db.get(b"").expect("get").as_deref(), Some(&b"empty key"[..]));
}

#[test]
fn batch_is_atomic_and_later_entries_win() {
    let (_memory, db) = memory_db();
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"1");
    batch.put(b"b", b"2");
    batch.delete(b"a");
    batch.put(b"c", b"3");
    batch.put(b"c", b"4");
    assert_eq!(batch.len(), 5);
    db.write(batch).expect("write");
    assert_eq!(db.get(b"a").expect("get"), None);
    assert_eq!(db.get(b"b").expect("get").as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(b"c").expect("get").as_deref(), Some(&b"4"[..]));
    db.write(WriteBatch::new()).expect("an empty batch is a no-op");
}

#[test]
fn snapshot_survives_flush_and_compaction() {
    let (_memory, db) = memory_db();
    for i in 0..300 {
        db.put(&key(i), &value(i, 1, 50)).expect("put");
    }
    let snapshot = db.snapshot();
    for i in 0..300 {
        if i % 2 == 0 {
            db.delete(&key(i)).expect("delete");
        } else {
            db.put(&key(i), &value(i, 2, 50)).expect("put");
        }
    }
    db.flush().expect("flush");
    db.compact_all().expect("compact");
    let at_snapshot = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
    for i in 0..300 {
        assert_eq!(db.get_opt(&key(i), &at_snapshot).expect("get"), Some(value(i, 1, 50)));
        let now = db.get(&key(i)).expect("get");
        assert_eq!(now, (i % 2 == 1).then(|| value(i, 2, 50)));
    }
    assert_eq!(dump(&db, &at_snapshot).len(), 300);
    drop(snapshot);
    db.compact_all().expect("compact");
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 150);
}

#[test]
fn iterator_sees_one_point_in_time_while_writes_go_on() {
    let (_memory, db) = memory_db();
    for i in 0..200 {
        db.put(&key(i), &value(i, 1, 40)).expect("put");
    }
    let mut iterator = db.iter(&ReadOptions::default()).expect("iter");
    for i in 0..200 {
        db.put(&key(i), &value(i, 2, 40)).expect("put");
        db.put(&key(1000 + i), b"new").expect("put");
    }
    db.flush().expect("flush");
    db.compact_all().expect("compact");
    iterator.seek_to_first();
    let mut count = 0;
    while iterator.valid() {
        assert_eq!(iterator.value(), value(count, 1, 40).as_slice());
        count += 1;
        iterator.next();
    }
    iterator.status().expect("status");
    assert_eq!(count, 200);
}

#[test]
fn iterator_edge_cases() {
    let (_memory, db) = memory_db();
    let mut empty = db.iter(&ReadOptions::default()).expect("iter");
    empty.seek_to_first();
    assert!(!empty.valid());
    empty.seek_to_last();
    assert!(!empty.valid());
    empty.seek(b"x");
    assert!(!empty.valid());
    for k in [b"b", b"d", b"f", b"h"] {
        db.put(k, k).expect("put");
    }
    db.delete(b"d").expect("delete");
    db.put(b"e", b"e").expect("put");
    db.delete(b"e").expect("delete");
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek(b"c");
    assert_eq!(it.key(), b"f", "tombstones are skipped forward");
    it.prev();
    assert_eq!(it.key(), b"b", "and backward");
    it.next();
    assert_eq!(it.key(), b"f");
    it.next();
    assert_eq!(it.key(), b"h");
    it.next();
    assert!(!it.valid());
    it.seek_for_prev(b"e");
    assert_eq!(it.key(), b"b");
    it.seek_for_prev(b"a");
    assert!(!it.valid());
    let bounded =
        ReadOptions { lower_bound: Some(b"c".to_vec()), upper_bound: Some(b"h".to_vec()), ..Default::default() };
    let keys: Vec<Vec<u8>> = db.iter(&bounded).expect("iter").map(|r| r.expect("entry").0).collect();
    assert_eq!(keys, vec![b"f".to_vec()]);
    let mut it = db.iter(&bounded).expect("iter");
    it.seek_to_last();
    assert_eq!(it.key(), b"f");
    it.seek(b"a");
    assert_eq!(it.key(), b"f", "seek below the lower bound clamps");
    it.seek(b"h");
    assert!(!it.valid(), "upper bound is exclusive");
    let all: Vec<(Vec<u8>, Vec<u8>)> = db.iter(&ReadOptions::default()).expect("iter").map(|r| r.expect("e")).collect();
    assert_eq!(all.len(), 3);
}

#[test]
fn concurrent_writers_and_readers() {
    let memory = MemFileSystem::new();
    let db = Arc::new(Db::open("/concurrent", small_options(Arc::new(memory.clone()))).expect("open"));
    let writers: Vec<_> = (0..4u64)
        .map(|thread| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..1500u64 {
                    let n = thread * 100_000 + i;
                    db.put_opt(&key(n), &value(n, 1, 64), &WriteOptions { sync: i % 100 == 0 }).expect("put");
                }
            })
        })
        .collect();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for _ in 0..30 {
                // Every key a reader sees is complete and in order.
                let mut previous: Option<Vec<u8>> = None;
                for entry in db.iter(&ReadOptions::default()).expect("iter") {
                    let (k, v) = entry.expect("entry");
                    let n: u64 = String::from_utf8_lossy(&k[3..9]).parse().expect("number");
                    assert_eq!(v, value(n, 1, 64));
                    assert!(previous.as_ref().is_none_or(|p| p < &k));
                    previous = Some(k);
                }
            }
        })
    };
    for writer in writers {
        writer.join().expect("writer");
    }
    reader.join().expect("reader");
    db.wait_for_background_work().expect("idle");
    for thread in 0..4u64 {
        for i in 0..1500u64 {
            let n = thread * 100_000 + i;
            assert_eq!(db.get(&key(n)).expect("get"), Some(value(n, 1, 64)));
        }
    }
}

/// Regression test. The story: `flush` queued an empty placeholder writer to obtain write
/// leadership, but a leader forming a group took every queued writer, the placeholder
/// included. The placeholder then got `Done` (or, in a parallel-insert group, `Insert`) instead
/// of `Lead` and waited forever; in the parallel case the leader also waited forever for its
/// insert, blocking every later write. Flushes racing writers of large batches reproduce it.
#[test]
fn flush_and_compaction_while_writers_write_large_batches() {
    let memory = MemFileSystem::new();
    let db = Arc::new(Db::open("/flush-race", small_options(Arc::new(memory.clone()))).expect("open"));
    let (sender, receiver) = std::sync::mpsc::channel();
    let writers: Vec<_> = (0..3u64)
        .map(|thread| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for round in 0..150u64 {
                    let mut batch = WriteBatch::new();
                    for i in 0..80u64 {
                        let n = thread * 1_000_000 + round * 100 + i;
                        batch.put(&key(n), &value(n, 1, 20));
                    }
                    db.write(batch).expect("write");
                }
            })
        })
        .collect();
    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for i in 0..40 {
                if i % 10 == 9 {
                    db.compact_all().expect("compact");
                } else {
                    db.flush().expect("flush");
                }
            }
            sender.send(()).expect("send");
        })
    };
    receiver.recv_timeout(std::time::Duration::from_secs(120)).expect("flush hung while writers were writing");
    flusher.join().expect("flusher");
    for writer in writers {
        writer.join().expect("writer");
    }
    assert_eq!(dump(&db, &ReadOptions::default()).len(), 3 * 150 * 80);
}
