//! Which sources an iterator merges: a memtable that was empty when the iterator read its
//! sequence is left out (it can hold nothing the iterator may see), and an iterator over one
//! source reads it without a merge. The tests check that leaving memtables out never hides a
//! write that finished before the iterator was made, with writers racing the iterators' creation
//! across flushes, and that every shape of source set (memtable only, one table, several
//! tables, with and without a range tombstone) reads the same as a model; and that seeks which
//! leave sources unpositioned (I49) read at their snapshot while a writer grows the memtable.

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

/// The number a key of `common::key` was made from.
fn number_of(key: &[u8]) -> u64 {
    std::str::from_utf8(&key[3..9]).expect("digits").parse().expect("a number")
}

/// Seeks that read one entry leave sources whose filters rule the key out unpositioned until the
/// iterator moves (I49), the active memtable among them; a writer adds keys and new versions to
/// that memtable meanwhile, the sought key included. Every answer must be the one the
/// iterator's snapshot gives, checked against gets at the snapshot: the entry a seek lands on,
/// and each step after it (with nothing skipped between two steps).
#[test]
fn seeks_that_leave_a_growing_memtable_pending_read_at_their_snapshot() {
    let db = Arc::new(Db::open("/pending-race", level0_keeping_options(Arc::new(MemFileSystem::new()))).expect("open"));
    // Even keys in three overlapping level-0 tables; odd keys come only from the writer.
    let keys = 3000u64;
    for table in 0..3 {
        let mut batch = WriteBatch::new();
        for number in (0..keys).filter(|number| number % 2 == 0 && (number / 2) % 3 == table) {
            batch.put(&key(number), &value(number, 0, 24));
        }
        db.write(batch).expect("write");
        db.flush().expect("flush");
    }
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut state = 7u64;
            let mut version = 1;
            while !done.load(Ordering::Acquire) {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let number = (state >> 33) % keys;
                db.put(&key(number), &value(number, version, 24)).expect("put");
                version += 1;
            }
        })
    };
    let mut state = 11u64;
    let mut random = move |bound: u64| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) % bound
    };
    for round in 0..3000 {
        let snapshot = db.snapshot();
        let options = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
        let at_snapshot = |number: u64| db.get_opt(&key(number), &options).expect("get");
        let mut iterator = db.iter(&options).expect("iterator");
        // A few seeks that read only their entry (they earn the probes), then steps.
        for seek in 0..3 {
            let number = random(keys / 2) * 2;
            iterator.seek(&key(number));
            assert!(iterator.valid(), "round {round}, seek {seek}: even key {number} is in a table");
            assert_eq!(iterator.key(), key(number).as_slice(), "round {round}, seek {seek}");
            assert_eq!(Some(iterator.value().to_vec()), at_snapshot(number), "round {round}, seek {seek}");
        }
        let mut previous = number_of(iterator.key());
        for step in 0..4 {
            iterator.next();
            if !iterator.valid() {
                assert!(((previous + 1)..keys).all(|number| at_snapshot(number).is_none()));
                break;
            }
            let number = number_of(iterator.key());
            assert!(number > previous, "round {round}, step {step}: {number} after {previous}");
            for skipped in (previous + 1)..number {
                assert_eq!(at_snapshot(skipped), None, "round {round}, step {step}: {skipped} was skipped");
            }
            assert_eq!(Some(iterator.value().to_vec()), at_snapshot(number), "round {round}, step {step}");
            previous = number;
        }
        iterator.status().expect("status");
    }
    done.store(true, Ordering::Release);
    writer.join().expect("writer");
}
