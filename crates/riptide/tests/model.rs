//! Model test: random puts, puts with a time to live, merges (an appending operator), deletes,
//! single deletes (where their contract holds), range deletes, batches, gets, iterations and
//! snapshots against a `BTreeMap`, with flushes, compactions, reopens and a moving clock mixed
//! in. Every answer is compared with the model as of the reader's read time.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::MemFileSystem;
use riptide::{Clock, Compression, Db, ManualClock, Options, ReadOptions, Snapshot, WriteBatch};

use common::{dump, key, small_options, value};

/// The live keys as of one read time.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A key's last full write (a value with its expiry, if it has one; none after a delete) and
/// the merge operands written since, oldest first.
#[derive(Clone, Debug, Default)]
struct Written {
    base: Option<(Vec<u8>, Option<u64>)>,
    operands: Vec<Vec<u8>>,
}

/// Every key's writes.
type Stored = BTreeMap<Vec<u8>, Written>;

/// The merge operator of the model test: the value beneath, then the operands, joined by `+`.
#[derive(Debug)]
struct Append;

impl riptide::MergeOperator for Append {
    fn name(&self) -> &str {
        "model.append"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut parts: Vec<&[u8]> = existing.into_iter().collect();
        parts.extend_from_slice(operands);
        Some(parts.join(&b"+"[..]))
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(operands.join(&b"+"[..]))
    }
}

/// What a reader at `read_time_us` sees: values that have not expired by then (I42), with the
/// operands after them applied (I43).
fn view(stored: &Stored, read_time_us: u64) -> Model {
    stored
        .iter()
        .filter_map(|(k, written)| {
            let base = written
                .base
                .as_ref()
                .filter(|(_, expiry)| expiry.is_none_or(|expiry| expiry > read_time_us))
                .map(|(value, _)| value.as_slice());
            if written.operands.is_empty() {
                return base.map(|value| (k.clone(), value.to_vec()));
            }
            let mut parts: Vec<&[u8]> = base.into_iter().collect();
            parts.extend(written.operands.iter().map(Vec::as_slice));
            Some((k.clone(), parts.join(&b"+"[..])))
        })
        .collect()
}

fn put_value(stored: &mut Stored, key: Vec<u8>, value: Vec<u8>, expiry: Option<u64>) {
    stored.insert(key, Written { base: Some((value, expiry)), operands: Vec::new() });
}

/// The clock the model runs on, from an arbitrary time in 2026.
const START_US: u64 = 1_790_000_000_000_000;

fn check_iteration(db: &Db, model: &Model, snapshot: Option<&Snapshot>, keys: u64, rng: &mut SmallRng) {
    let lower = rng.gen_bool(0.5).then(|| key(rng.gen_range(0..keys)));
    let upper = rng.gen_bool(0.5).then(|| key(rng.gen_range(0..keys)));
    let options = ReadOptions {
        snapshot: snapshot.cloned(),
        lower_bound: lower.clone(),
        upper_bound: upper.clone(),
        ..ReadOptions::default()
    };
    let expected: Vec<(&Vec<u8>, &Vec<u8>)> = model
        .iter()
        .filter(|(k, _)| lower.as_ref().is_none_or(|l| *k >= l) && upper.as_ref().is_none_or(|u| *k < u))
        .collect();
    let mut iterator = db.iter(&options).expect("iterator");
    if rng.gen_bool(0.5) {
        iterator.seek_to_first();
        for (k, v) in &expected {
            assert!(iterator.valid(), "iterator ended early, expected {:?}", String::from_utf8_lossy(k));
            assert_eq!(iterator.key(), k.as_slice());
            assert_eq!(iterator.value(), v.as_slice());
            iterator.next();
        }
    } else {
        iterator.seek_to_last();
        for (k, v) in expected.iter().rev() {
            assert!(iterator.valid(), "reverse iterator ended early");
            assert_eq!(iterator.key(), k.as_slice());
            assert_eq!(iterator.value(), v.as_slice());
            iterator.prev();
        }
    }
    assert!(!iterator.valid());
    iterator.status().expect("status");
    // A random seek compared with the model.
    let target = key(rng.gen_range(0..keys));
    iterator.seek(&target);
    let expected_seek = expected.iter().find(|(k, _)| k.as_slice() >= target.as_slice());
    match expected_seek {
        Some((k, _)) => assert_eq!(iterator.key(), k.as_slice()),
        None => assert!(!iterator.valid()),
    }
    iterator.seek_for_prev(&target);
    let expected_prev = expected.iter().rev().find(|(k, _)| k.as_slice() <= target.as_slice());
    match expected_prev {
        Some((k, _)) => assert_eq!(iterator.key(), k.as_slice()),
        None => assert!(!iterator.valid()),
    }
}

/// Runs `steps` random operations over keys `0..keys`: a few hundred keys give a key a few
/// versions, a dozen give it hundreds (backward scans then read keys by seeking).
fn run(seed: u64, steps: usize, keys: u64, mut options: Options) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let path = Path::new("/model");
    let file_system = MemFileSystem::new();
    options.file_system = Arc::new(file_system.clone());
    let clock = Arc::new(ManualClock::new(START_US));
    options.clock = clock.clone();
    options.merge_operator = Some(Arc::new(Append));
    let mut db = Db::open(path, options.clone()).expect("open");
    let mut model = Stored::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut version = 0u64;
    // A single delete keeps its contract (as RocksDB's) only for a key put at most once since
    // its last single delete and never deleted with a plain delete: puts since the last single
    // delete, per key, and the keys a plain delete touched.
    let mut puts_since_single_delete: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    let mut deleted_plainly: std::collections::BTreeSet<Vec<u8>> = std::collections::BTreeSet::new();
    for _ in 0..steps {
        version += 1;
        match rng.gen_range(0..100) {
            0..=2 => {
                // A range delete, now and then over most of the key space.
                let start = rng.gen_range(0..keys);
                let span = if rng.gen_bool(0.1) { rng.gen_range(0..keys) } else { rng.gen_range(0..40) };
                let (start_key, end_key) = (key(start), key(start + span));
                db.delete_range(&start_key, &end_key).expect("delete_range");
                model.retain(|k, _| !(k.as_slice() >= start_key.as_slice() && k.as_slice() < end_key.as_slice()));
            }
            3..=39 => {
                let n = rng.gen_range(0..keys);
                let v = value(n, version, rng.gen_range(0..120));
                if rng.gen_bool(0.2) {
                    // Expires within a few of the clock's steps.
                    let ttl_us = rng.gen_range(1..4_000_000);
                    db.put_with_ttl(&key(n), &v, std::time::Duration::from_micros(ttl_us)).expect("put_with_ttl");
                    put_value(&mut model, key(n), v, Some(clock.now_us() + ttl_us));
                } else if rng.gen_bool(0.2) {
                    // A merge operand: short, so that long chains stay readable.
                    let operand = format!("m{version}").into_bytes();
                    db.merge(&key(n), &operand).expect("merge");
                    model.entry(key(n)).or_default().operands.push(operand);
                } else {
                    db.put(&key(n), &v).expect("put");
                    put_value(&mut model, key(n), v, None);
                }
                *puts_since_single_delete.entry(key(n)).or_default() += 1;
            }
            40..=51 => {
                let n = rng.gen_range(0..keys);
                // A single delete where its contract holds, a delete otherwise.
                let eligible = !deleted_plainly.contains(&key(n))
                    && puts_since_single_delete.get(&key(n)).copied().unwrap_or(0) <= 1;
                if eligible && rng.gen_bool(0.5) {
                    db.single_delete(&key(n)).expect("single_delete");
                    puts_since_single_delete.remove(&key(n));
                } else {
                    db.delete(&key(n)).expect("delete");
                    deleted_plainly.insert(key(n));
                }
                model.remove(&key(n));
            }
            52..=61 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let n = rng.gen_range(0..keys);
                    if rng.gen_bool(0.7) {
                        let v = value(n, version, rng.gen_range(0..60));
                        if rng.gen_bool(0.2) {
                            // An explicit expiry, possibly already past.
                            let expiry = clock.now_us() + rng.gen_range(0..4_000_000) - 500_000;
                            batch.put_with_expiry(&key(n), &v, expiry);
                            put_value(&mut model, key(n), v, Some(expiry));
                        } else if rng.gen_bool(0.2) {
                            let operand = format!("b{version}").into_bytes();
                            batch.merge(&key(n), &operand);
                            model.entry(key(n)).or_default().operands.push(operand);
                        } else {
                            batch.put(&key(n), &v);
                            put_value(&mut model, key(n), v, None);
                        }
                        *puts_since_single_delete.entry(key(n)).or_default() += 1;
                    } else if rng.gen_bool(0.1) {
                        let (start_key, end_key) = (key(n), key(n + rng.gen_range(0..20)));
                        batch.delete_range(&start_key, &end_key);
                        model.retain(|k, _| {
                            !(k.as_slice() >= start_key.as_slice() && k.as_slice() < end_key.as_slice())
                        });
                    } else {
                        batch.delete(&key(n));
                        model.remove(&key(n));
                        deleted_plainly.insert(key(n));
                    }
                }
                db.write(batch).expect("write");
            }
            62..=74 => {
                let n = rng.gen_range(0..keys);
                let now = view(&model, clock.now_us());
                assert_eq!(db.get(&key(n)).expect("get"), now.get(&key(n)).cloned(), "seed {seed} key {n}");
            }
            75..=76 => clock.advance(std::time::Duration::from_micros(rng.gen_range(0..1_500_000))),
            77..=81 => check_iteration(&db, &view(&model, clock.now_us()), None, keys, &mut rng),
            82..=84 => {
                if snapshots.len() >= 3 {
                    snapshots.remove(0);
                }
                let snapshot = db.snapshot();
                let seen = view(&model, snapshot.read_time_us());
                snapshots.push((snapshot, seen));
            }
            85..=89 => {
                if let Some((snapshot, snapshot_model)) = snapshots.get(rng.gen_range(0..snapshots.len().max(1))) {
                    let n = rng.gen_range(0..keys);
                    let options = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
                    assert_eq!(db.get_opt(&key(n), &options).expect("get"), snapshot_model.get(&key(n)).cloned());
                    check_iteration(&db, snapshot_model, Some(snapshot), keys, &mut rng);
                }
            }
            90..=93 => db.flush().expect("flush"),
            94..=95 => db.compact_all().expect("compact"),
            96..=97 => {
                snapshots.clear();
                db.close().expect("close");
                db = Db::open(path, options.clone()).expect("reopen");
            }
            _ => db.wait_for_background_work().expect("wait"),
        }
    }
    assert_eq!(dump(&db, &ReadOptions::default()), view(&model, clock.now_us()), "final state, seed {seed}");
    snapshots.clear();
    db.close().expect("close");
    let db = Db::open(path, options).expect("final reopen");
    assert_eq!(dump(&db, &ReadOptions::default()), view(&model, clock.now_us()), "after reopen, seed {seed}");
}

#[test]
fn model_small_tables() {
    for seed in 0..6 {
        run(seed, 3000, 400, small_options(Arc::new(MemFileSystem::new())));
    }
}

#[test]
fn model_every_compression_and_tiny_blocks() {
    for (seed, compression) in
        [Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy].into_iter().enumerate()
    {
        let options = Options {
            compression,
            block_size_bytes: 256,
            block_restart_interval: 1 + seed,
            bloom_bits_per_key: (seed as u32) * 5,
            ..small_options(Arc::new(MemFileSystem::new()))
        };
        run(100 + seed as u64, 2000, 400, options);
    }
}

#[test]
fn model_default_options() {
    run(200, 3000, 400, Options::default());
}

#[test]
fn model_hot_keys() {
    // A few keys rewritten hundreds of times, in memtables and tables: backward scans read a key
    // with many versions by seeking to its newest visible version (merges, expiries, blob
    // references and range tombstones included) rather than stepping over every version. Odd
    // seeds separate values into blob files; larger memtables keep longer runs of versions.
    for seed in 0..16u64 {
        let options = Options {
            min_blob_size_bytes: (seed % 2 == 1).then_some(40),
            memtable_size_bytes: 16 << (10 + seed % 4),
            ..small_options(Arc::new(MemFileSystem::new()))
        };
        run(300 + seed, 3000, [2, 3, 5, 12][(seed / 4) as usize], options);
    }
}

#[test]
fn model_on_real_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = SmallRng::seed_from_u64(7);
    let options = small_options(Arc::new(riptide::fs::OsFileSystem));
    let path = dir.path().join("db");
    let mut db = Db::open(&path, options.clone()).expect("open");
    let mut model = Model::new();
    for round in 0..5u64 {
        for i in 0..1500u64 {
            let n = rng.gen_range(0..1000);
            if rng.gen_bool(0.8) {
                let v = value(n, round * 10_000 + i, 80);
                db.put(&key(n), &v).expect("put");
                model.insert(key(n), v);
            } else {
                db.delete(&key(n)).expect("delete");
                model.remove(&key(n));
            }
        }
        assert_eq!(dump(&db, &ReadOptions::default()), model);
        db.close().expect("close");
        db = Db::open(&path, options.clone()).expect("reopen");
        assert_eq!(dump(&db, &ReadOptions::default()), model);
    }
}
