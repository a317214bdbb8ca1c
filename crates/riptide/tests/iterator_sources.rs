//! Which sources an iterator merges: a memtable that was empty when the iterator read its
//! sequence is left out (it can hold nothing the iterator may see), and an iterator over one
//! source reads it without a merge. The tests check that leaving memtables out never hides a
//! write that finished before the iterator was made, with writers racing the iterators' creation
//! across flushes, and that every shape of source set (memtable only, one table, several
//! tables, with and without a range tombstone) reads the same as a model.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use riptide::fs::MemFileSystem;
use riptide::{Db, ReadOptions, WriteBatch};

use common::{dump, key, level0_keeping_options, small_options, value};

/// Runs `check` over and over while a writer makes writes 1 to 3,000 (`write`) and flushes after
/// every fourth, so that many reads start right after a flush, over an empty memtable, while the
/// next write is being made. `check` gets the number of writes that had returned before it
/// started; it runs at least 2,000 times.
fn race_reads_with_a_flushing_writer(
    path: &str,
    write: impl Fn(&Db, u64) + Send + 'static,
    mut check: impl FnMut(&Db, u64),
) {
    let db = Arc::new(Db::open(path, small_options(Arc::new(MemFileSystem::new()))).expect("open"));
    let finished = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, finished, done) = (Arc::clone(&db), Arc::clone(&finished), Arc::clone(&done));
        std::thread::spawn(move || {
            for number in 1..=3000u64 {
                write(&db, number);
                finished.store(number, Ordering::Release);
                if number % 4 == 0 {
                    db.flush().expect("flush");
                }
            }
            done.store(true, Ordering::Release);
        })
    };
    let mut checks = 0u64;
    while !done.load(Ordering::Acquire) || checks < 2000 {
        check(&db, finished.load(Ordering::Acquire));
        checks += 1;
    }
    writer.join().expect("writer");
}

/// A writer puts keys in order: every iterator must see every key whose put returned before the
/// iterator was made.
#[test]
fn an_iterator_made_over_an_empty_memtable_sees_every_finished_write() {
    race_reads_with_a_flushing_writer(
        "/sources-race",
        |db, number| db.put(&key(number - 1), &value(number - 1, 1, 20)).expect("put"),
        |db, expected| {
            let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
            iterator.seek_to_first();
            let mut seen = 0u64;
            while iterator.valid() && seen < expected {
                assert_eq!(iterator.key(), key(seen).as_slice(), "key {seen} missing with {expected} writes finished");
                seen += 1;
                iterator.next();
            }
            iterator.status().expect("iterator status");
            assert_eq!(seen, expected, "an iterator made after {expected} finished writes saw {seen}");
        },
    );
}

/// The same race for point reads: a writer overwrites one key. Every get must see the put that
/// finished last before it started, or a newer one.
#[test]
fn a_get_over_an_empty_memtable_sees_every_finished_write() {
    race_reads_with_a_flushing_writer(
        "/sources-get-race",
        |db, number| db.put(b"latest", &number.to_be_bytes()).expect("put"),
        |db, expected| {
            let found = db.get(b"latest").expect("get");
            let seen = found.map_or(0, |bytes| u64::from_be_bytes(bytes.try_into().expect("eight bytes")));
            assert!(seen >= expected, "a get after {expected} finished writes saw write {seen}");
        },
    );
}

/// Reads the database forward, backward and from seeks, and compares with the model.
fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, shape: &str) {
    assert_eq!(&dump(db, &ReadOptions::default()), model, "{shape}: forward");
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    iterator.seek_to_last();
    let mut backward = Vec::new();
    while iterator.valid() {
        backward.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.prev();
    }
    iterator.status().expect("status");
    let expected: Vec<_> = model.iter().rev().map(|(key, value)| (key.clone(), value.clone())).collect();
    assert_eq!(backward, expected, "{shape}: backward");
    for number in (0..400).step_by(37) {
        let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
        iterator.seek(&key(number));
        let first = model.range(key(number)..).next();
        assert_eq!(iterator.valid(), first.is_some(), "{shape}: seek {number}");
        if let Some((model_key, model_value)) = first {
            assert_eq!(
                (iterator.key(), iterator.value()),
                (&model_key[..], &model_value[..]),
                "{shape}: seek {number}"
            );
            iterator.prev();
            let before = model.range(..key(number)).next_back();
            assert_eq!(iterator.valid(), before.is_some(), "{shape}: prev after seek {number}");
        }
    }
    check_reseeks(db, model, shape);
}

/// One iterator sought again and again, as a SQL engine's lookups in index order do: targets
/// just ahead (the next key, often one the iterator stands on or passed with `next`), far
/// ahead, behind, after a backward move and past the end. A re-seek ahead moves the sources on
/// from where they stand; every answer must still be the model's.
fn check_reseeks(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, shape: &str) {
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    let mut targets: Vec<u64> = Vec::new();
    targets.extend(0..12);
    targets.extend([13, 13, 40, 41, 300, 2, 150, 151, 152, 120, 399, 403, 404, 500, 7, 8, 9]);
    targets.extend((60..400).step_by(23));
    for (step, &number) in targets.iter().enumerate() {
        if step % 5 == 4 {
            iterator.seek_for_prev(&key(number + 3));
        }
        iterator.seek(&key(number));
        let expected = model.range(key(number)..).next();
        assert_eq!(iterator.valid(), expected.is_some(), "{shape}: re-seek {step} to {number}");
        if let Some((model_key, model_value)) = expected {
            assert_eq!(
                (iterator.key(), iterator.value()),
                (&model_key[..], &model_value[..]),
                "{shape}: re-seek {step} to {number}"
            );
            if step % 3 == 0 {
                iterator.next();
                let following =
                    model.range((std::ops::Bound::Excluded(model_key.clone()), std::ops::Bound::Unbounded)).next();
                assert_eq!(
                    iterator.valid().then(|| iterator.key().to_vec()),
                    following.map(|(following_key, _)| following_key.clone()),
                    "{shape}: next after re-seek {step}"
                );
            }
        }
    }
    iterator.status().expect("status");
}

#[test]
fn every_shape_of_sources_reads_like_the_model() {
    let db = Db::open("/sources-shapes", level0_keeping_options(Arc::new(MemFileSystem::new()))).expect("open");
    let mut model = BTreeMap::new();
    check(&db, &model, "empty");
    for number in 0..400 {
        db.put(&key(number), &value(number, 1, 30)).expect("put");
        model.insert(key(number), value(number, 1, 30));
    }
    check(&db, &model, "memtable only");
    db.flush().expect("flush");
    check(&db, &model, "one table, empty memtable");
    for number in (0..400).step_by(3) {
        db.put(&key(number), &value(number, 2, 30)).expect("put");
        model.insert(key(number), value(number, 2, 30));
    }
    db.flush().expect("flush");
    check(&db, &model, "two overlapping tables, empty memtable");
    // Each put into a memtable emptied by a flush is seen by the next iterator.
    for number in 400..404 {
        db.flush().expect("flush");
        db.put(&key(number), &value(number, 1, 30)).expect("put");
        model.insert(key(number), value(number, 1, 30));
        check(&db, &model, "one entry in the memtable over tables");
    }
    let mut batch = WriteBatch::new();
    batch.delete_range(&key(100), &key(150));
    db.write(batch).expect("range delete");
    model.retain(|model_key, _| !(key(100)..key(150)).contains(model_key));
    check(&db, &model, "a range tombstone in the memtable");
    db.flush().expect("flush");
    check(&db, &model, "a range tombstone in a table, empty memtable");
    db.compact_range(&db.default_column_family(), None, None).expect("compact");
    check(&db, &model, "one compacted level, empty memtable");
    let snapshot = db.snapshot();
    db.put(&key(5), b"after the snapshot").expect("put");
    let at_snapshot = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
    assert_eq!(dump(&db, &at_snapshot), model, "a snapshot taken over an empty memtable");
    db.close().expect("close");
}
