//! Iterators move to newer views when they are positioned again: a re-seeked iterator reads the
//! tables a compaction made since it was created (and lets go of the files they replaced) when
//! that reads exactly as its own view would, that is when it holds a snapshot or nothing was
//! written since its sequence. The tests check that what an iterator returns never changes
//! (later writes stay invisible, with and without a snapshot), that the old files are released
//! when the iterator moves and kept when it must not, and that an iterator of a dropped column
//! family keeps its data.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use riptide::fs::{FileSystem, MemFileSystem};
use riptide::{Db, DbIterator, Options, ReadOptions};

use common::{key, level0_keeping_options, value};

const KEYS: u64 = 2000;

fn open(path: &str) -> (Db, MemFileSystem) {
    let memory = MemFileSystem::new();
    let options = Options {
        // Only `compact_range` compacts here.
        read_compaction_bytes_per_table_seek: 0,
        ..level0_keeping_options(Arc::new(memory.clone()))
    };
    (Db::open(path, options).expect("open"), memory)
}

/// Three overlapping level-0 files; returns what they hold.
fn build_level0(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for version in 1..=3 {
        for number in 0..KEYS {
            db.put(&key(number), &value(number, version, 40)).expect("put");
            model.insert(key(number), value(number, version, 40));
        }
        db.flush().expect("flush");
    }
    model
}

fn table_files(memory: &MemFileSystem, path: &str) -> usize {
    memory.list(Path::new(path)).expect("list").iter().filter(|name| name.ends_with(".sst")).count()
}

/// Everything from a seek to the first key on, read forward.
fn read_all(iterator: &mut DbIterator) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    iterator.seek_to_first();
    while iterator.valid() {
        out.insert(iterator.key().to_vec(), iterator.value().to_vec());
        iterator.next();
    }
    iterator.status().expect("iterator status");
    out
}

fn compact(db: &Db) {
    db.compact_range(&db.default_column_family(), None, None).expect("compact");
    db.wait_for_background_work().expect("idle");
}

#[test]
fn a_reseeked_iterator_moves_to_the_compacted_tables_and_releases_the_old_ones() {
    let (db, memory) = open("/refresh");
    let model = build_level0(&db);
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    assert_eq!(read_all(&mut iterator), model);
    compact(&db);
    let live = db.stats().levels.iter().map(|level| level.files).sum::<usize>();
    assert!(table_files(&memory, "/refresh") >= live + 3, "the iterator pins the three level-0 files");
    // The seek moves it: same data, and the replaced files go.
    assert_eq!(read_all(&mut iterator), model);
    assert_eq!(table_files(&memory, "/refresh"), live, "the iterator still pins replaced files");
    iterator.seek(&key(17));
    assert_eq!(iterator.value(), model[&key(17)].as_slice());
    drop(iterator);
    db.close().expect("close");
}

#[test]
fn an_iterator_without_snapshot_stays_on_its_view_once_anything_was_written() {
    let (db, memory) = open("/refresh-written");
    let model = build_level0(&db);
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    assert_eq!(read_all(&mut iterator), model);
    db.put(b"zzz-later", b"invisible").expect("put");
    db.put(&key(5), b"overwritten later").expect("put");
    compact(&db);
    let live = db.stats().levels.iter().map(|level| level.files).sum::<usize>();
    for _ in 0..3 {
        assert_eq!(read_all(&mut iterator), model, "a later write became visible");
    }
    assert!(table_files(&memory, "/refresh-written") >= live + 3, "the iterator must keep its own view");
    drop(iterator);
    assert_eq!(table_files(&memory, "/refresh-written"), live);
    db.close().expect("close");
}

#[test]
fn an_iterator_with_a_snapshot_moves_and_still_reads_its_snapshot() {
    let (db, memory) = open("/refresh-snapshot");
    let model = build_level0(&db);
    let snapshot = db.snapshot();
    let mut iterator =
        db.iter(&ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() }).expect("iterator");
    assert_eq!(read_all(&mut iterator), model);
    db.put(b"zzz-later", b"invisible").expect("put");
    for number in 0..KEYS {
        db.put(&key(number), b"overwritten later").expect("put");
    }
    db.delete(&key(3)).expect("delete");
    compact(&db);
    let live = db.stats().levels.iter().map(|level| level.files).sum::<usize>();
    assert_eq!(read_all(&mut iterator), model, "the snapshot's data changed when the iterator moved");
    assert_eq!(table_files(&memory, "/refresh-snapshot"), live, "the iterator still pins replaced files");
    drop(iterator);
    drop(snapshot);
    db.close().expect("close");
}

#[test]
fn an_iterator_of_a_dropped_column_family_keeps_its_data() {
    let (db, _memory) = open("/refresh-dropped");
    let family = db
        .create_column_family("other", db.column_family_options(&db.default_column_family()).expect("options"))
        .expect("create");
    let mut model = BTreeMap::new();
    for number in 0..KEYS {
        db.put_cf(&family, &key(number), &value(number, 1, 40)).expect("put");
        model.insert(key(number), value(number, 1, 40));
    }
    db.flush().expect("flush");
    let mut iterator = db.iter_cf(&family, &ReadOptions::default()).expect("iterator");
    assert_eq!(read_all(&mut iterator), model);
    db.drop_column_family(&family).expect("drop");
    assert_eq!(read_all(&mut iterator), model, "the dropped family's iterator lost its data");
    drop(iterator);
    db.close().expect("close");
}

#[test]
fn an_iterator_outliving_its_database_keeps_its_view() {
    let (db, _memory) = open("/refresh-closed");
    let model = build_level0(&db);
    let mut iterator = db.iter(&ReadOptions::default()).expect("iterator");
    compact(&db);
    // `close` consumes the handle: the database is gone, the iterator's files are not.
    db.close().expect("close");
    assert_eq!(read_all(&mut iterator), model, "an iterator of a closed database lost its data");
    iterator.seek(&key(11));
    assert_eq!(iterator.value(), model[&key(11)].as_slice());
}

/// Long-lived iterators, with and without snapshots, re-seeked at random while a writer
/// overwrites and deletes keys, flushes and compacts (read-triggered compaction at its most
/// eager, so that views change all the time): every answer must be the one of the data as it
/// was when the iterator was created (or its snapshot taken), whichever view it reads by then.
#[test]
fn reseeked_iterators_read_their_own_point_in_time_while_views_change() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    let memory = MemFileSystem::new();
    let options = Options {
        file_system: Arc::new(memory),
        memtable_size_bytes: 16 << 10,
        block_size_bytes: 512,
        target_file_size_bytes: 16 << 10,
        level0_compaction_trigger_files: 4,
        level0_slowdown_writes_files: 12,
        level0_stop_writes_files: 20,
        read_compaction_bytes_per_table_seek: 1,
        ..Options::default()
    };
    let db = Db::open("/refresh-random", options).expect("open");
    let mut random = SmallRng::seed_from_u64(0x5eed_0045);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    // Each live iterator with the data it must read, and the snapshot it holds, if any.
    type LiveIterator = (DbIterator, BTreeMap<Vec<u8>, Vec<u8>>, Option<riptide::Snapshot>);
    let mut iterators: Vec<LiveIterator> = Vec::new();
    let mut seeks = 0u64;
    for step in 0..6000u64 {
        match random.gen_range(0..100) {
            0..=54 => {
                let number = random.gen_range(0..400);
                let written = value(number, step, random.gen_range(10..120));
                db.put(&key(number), &written).expect("put");
                model.insert(key(number), written);
            }
            55..=64 => {
                let number = random.gen_range(0..400);
                db.delete(&key(number)).expect("delete");
                model.remove(&key(number));
            }
            65..=66 => db.flush().expect("flush"),
            67 => db.compact_range(&db.default_column_family(), None, None).expect("compact"),
            68..=70 => {
                let snapshot = random.gen_bool(0.5).then(|| db.snapshot());
                let read = ReadOptions { snapshot: snapshot.clone(), ..ReadOptions::default() };
                iterators.push((db.iter(&read).expect("iterator"), model.clone(), snapshot));
                if iterators.len() > 6 {
                    let index = random.gen_range(0..iterators.len());
                    iterators.swap_remove(index);
                }
            }
            _ if iterators.is_empty() => {}
            _ => {
                let index = random.gen_range(0..iterators.len());
                let (iterator, expected, _) = &mut iterators[index];
                let target = key(random.gen_range(0..420));
                seeks += 1;
                let (found, wanted) = match random.gen_range(0..4) {
                    0 => {
                        iterator.seek(&target);
                        (iterator.valid(), expected.range(target.clone()..).next())
                    }
                    1 => {
                        iterator.seek_for_prev(&target);
                        (iterator.valid(), expected.range(..=target.clone()).next_back())
                    }
                    2 => {
                        iterator.seek_to_first();
                        (iterator.valid(), expected.iter().next())
                    }
                    _ => {
                        iterator.seek_to_last();
                        (iterator.valid(), expected.iter().next_back())
                    }
                };
                iterator.status().expect("iterator status");
                match wanted {
                    Some((wanted_key, wanted_value)) => {
                        assert!(found, "step {step}: no entry where {wanted_key:?} is");
                        assert_eq!(iterator.key(), wanted_key.as_slice(), "step {step}");
                        assert_eq!(iterator.value(), wanted_value.as_slice(), "step {step}");
                        // A few steps on: the neighbours are the model's too.
                        let mut rest = expected.range(wanted_key.clone()..).skip(1);
                        for _ in 0..3 {
                            iterator.next();
                            match rest.next() {
                                Some((next_key, next_value)) => {
                                    assert!(iterator.valid(), "step {step}");
                                    assert_eq!(iterator.key(), next_key.as_slice(), "step {step}");
                                    assert_eq!(iterator.value(), next_value.as_slice(), "step {step}");
                                }
                                None => assert!(!iterator.valid(), "step {step}: an entry past the end"),
                            }
                        }
                    }
                    None => assert!(!found, "step {step}: an entry where none is"),
                }
            }
        }
    }
    let stats = db.stats();
    assert!(seeks > 1000 && stats.compaction_count > 0, "the run was meant to seek across compactions:\n{stats}");
    drop(iterators);
    db.close().expect("close");
}
