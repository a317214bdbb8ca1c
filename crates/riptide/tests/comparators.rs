//! Comparators: column families ordered by something other than bytes. Model tests run the
//! reverse bytewise order and two custom orders (by the big-endian integer in a key's last eight
//! bytes, and by length then bytes) against a `BTreeMap` sorted the same way by an independent
//! sort key, through puts, deletes, overwrites, batches, flushes, compactions (automatic and
//! `compact_range` over ranges of the order), iterators in both directions with seeks and
//! bounds, snapshots and reopens. Two column families of different orders share one database.
//! A column family opened with a comparator of another name is refused with `InvalidArgument`
//! and the database is left as it was, a run-time change of comparator is refused, and a
//! manifest written before comparators were recorded per column family opens as bytewise.

mod common;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::{FileSystem, MemFileSystem};
use riptide::{
    BytewiseComparator, ColumnFamily, ColumnFamilyOptions, Comparator, Db, Error, Options, ReadOptions,
    ReverseBytewiseComparator, Snapshot, WriteBatch,
};

use common::{small_options, value};

/// Orders keys by the big-endian integer in their last eight bytes (0 for shorter keys), then
/// bytewise, so that keys which differ in their first bytes interleave.
struct SuffixComparator;

fn integer_suffix(key: &[u8]) -> u64 {
    match key.len().checked_sub(8) {
        Some(start) => u64::from_be_bytes(key[start..].try_into().expect("eight bytes")),
        None => 0,
    }
}

impl Comparator for SuffixComparator {
    fn name(&self) -> &str {
        "test.integer_suffix"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        integer_suffix(a).cmp(&integer_suffix(b)).then_with(|| a.cmp(b))
    }
}

/// Orders keys by length, then bytewise.
struct LengthThenBytesComparator;

impl Comparator for LengthThenBytesComparator {
    fn name(&self) -> &str {
        "test.length_then_bytes"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.len().cmp(&b.len()).then_with(|| a.cmp(b))
    }
}

/// A comparator whose name is empty, which options validation refuses.
struct NamelessComparator;

impl Comparator for NamelessComparator {
    fn name(&self) -> &str {
        ""
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
}

/// The orders under test, each with keys that spread differently in it than bytewise.
#[derive(Clone, Copy, Debug)]
enum Order {
    Bytewise,
    Reverse,
    Suffix,
    LengthThenBytes,
}

/// A key of the model's `BTreeMap`: its derived order is the column family's order, computed
/// independently of the comparator under test. A model uses one variant only.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SortKey {
    Bytes(Vec<u8>),
    Reversed(std::cmp::Reverse<Vec<u8>>),
    Suffix(u64, Vec<u8>),
    Length(usize, Vec<u8>),
}

impl Order {
    fn comparator(self) -> Arc<dyn Comparator> {
        match self {
            Order::Bytewise => Arc::new(BytewiseComparator),
            Order::Reverse => Arc::new(ReverseBytewiseComparator),
            Order::Suffix => Arc::new(SuffixComparator),
            Order::LengthThenBytes => Arc::new(LengthThenBytesComparator),
        }
    }

    fn sort_key(self, key: &[u8]) -> SortKey {
        match self {
            Order::Bytewise => SortKey::Bytes(key.to_vec()),
            Order::Reverse => SortKey::Reversed(std::cmp::Reverse(key.to_vec())),
            Order::Suffix => SortKey::Suffix(integer_suffix(key), key.to_vec()),
            Order::LengthThenBytes => SortKey::Length(key.len(), key.to_vec()),
        }
    }

    /// Key number `number` (below 10,000): distinct numbers give distinct keys.
    fn key(self, number: u64) -> Vec<u8> {
        match self {
            Order::Bytewise | Order::Reverse => common::key(number),
            Order::Suffix => {
                // A prefix that is unrelated to the suffix's order, then a scrambled suffix.
                let mut key = vec![b'a' + (number * 7 % 26) as u8; (number % 3) as usize + 1];
                key.extend_from_slice(&(number * 7919 % 10_007).to_be_bytes());
                key
            }
            Order::LengthThenBytes => format!("{}{number}", "z".repeat((number * 7 % 5) as usize)).into_bytes(),
        }
    }
}

/// The expected contents of one column family, sorted in its order.
#[derive(Clone)]
struct Model {
    order: Order,
    entries: BTreeMap<SortKey, (Vec<u8>, Vec<u8>)>,
}

impl Model {
    fn new(order: Order) -> Model {
        Model { order, entries: BTreeMap::new() }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.entries.insert(self.order.sort_key(key), (key.to_vec(), value.to_vec()));
    }

    fn delete(&mut self, key: &[u8]) {
        self.entries.remove(&self.order.sort_key(key));
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.entries.get(&self.order.sort_key(key)).map(|(_, value)| value.clone())
    }

    /// The entries in `[lower, upper)` of the model's order, in that order.
    fn view(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let lower = lower.map(|key| self.order.sort_key(key));
        let upper = upper.map(|key| self.order.sort_key(key));
        self.entries
            .iter()
            .filter(|(sort_key, _)| lower.as_ref().is_none_or(|lower| *sort_key >= lower))
            .filter(|(sort_key, _)| upper.as_ref().is_none_or(|upper| *sort_key < upper))
            .map(|(_, entry)| entry.clone())
            .collect()
    }
}

fn column_family_options(order: Order) -> ColumnFamilyOptions {
    let mut options = ColumnFamilyOptions::default();
    options.comparator = order.comparator();
    options.memtable_size_bytes = 8 << 10;
    options.block_size_bytes = 256;
    options.target_file_size_bytes = 8 << 10;
    options.level0_compaction_trigger_files = 2;
    options.level0_slowdown_writes_files = 7;
    options.level0_stop_writes_files = 8;
    options
}

fn database_options(memory: &MemFileSystem, default_order: Order) -> Options {
    Options {
        comparator: default_order.comparator(),
        memtable_size_bytes: 8 << 10,
        block_size_bytes: 256,
        target_file_size_bytes: 8 << 10,
        // Several sub-compaction boundaries per job, so that their order matters.
        max_subcompactions: 4,
        ..small_options(Arc::new(memory.clone()))
    }
}

/// Everything in a column family, in iteration order.
fn scan(db: &Db, family: &ColumnFamily, options: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::entries(db.iter_cf(family, options).expect("iterator"))
}

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(result: riptide::Result<T>, mentions: &[&str]) {
    match result {
        Err(Error::InvalidArgument(message)) => {
            for word in mentions {
                assert!(message.contains(word), "{message:?} does not mention {word:?}");
            }
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// Iterates a column family in both directions, seeks and seeks for previous keys, all with
/// random bounds, and compares every step with the model.
fn check_iteration(db: &Db, family: &ColumnFamily, model: &Model, snapshot: Option<&Snapshot>, rng: &mut SmallRng) {
    let order = model.order;
    let lower = rng.gen_bool(0.4).then(|| order.key(rng.gen_range(0..500)));
    let upper = rng.gen_bool(0.4).then(|| order.key(rng.gen_range(0..500)));
    let options = ReadOptions {
        snapshot: snapshot.cloned(),
        lower_bound: lower.clone(),
        upper_bound: upper.clone(),
        ..ReadOptions::default()
    };
    let expected = model.view(lower.as_deref(), upper.as_deref());
    let mut iterator = db.iter_cf(family, &options).expect("iterator");
    if rng.gen_bool(0.5) {
        iterator.seek_to_first();
        for (key, value) in &expected {
            assert!(iterator.valid(), "{order:?}: forward scan ended before {key:?}");
            assert_eq!((iterator.key(), iterator.value()), (key.as_slice(), value.as_slice()), "{order:?}");
            iterator.next();
        }
    } else {
        iterator.seek_to_last();
        for (key, value) in expected.iter().rev() {
            assert!(iterator.valid(), "{order:?}: backward scan ended before {key:?}");
            assert_eq!((iterator.key(), iterator.value()), (key.as_slice(), value.as_slice()), "{order:?}");
            iterator.prev();
        }
    }
    assert!(!iterator.valid(), "{order:?}: the scan went past the model");
    iterator.status().expect("status");

    for _ in 0..4 {
        let target = order.key(rng.gen_range(0..500));
        let target_sort_key = order.sort_key(&target);
        let position = expected.partition_point(|(key, _)| order.sort_key(key) < target_sort_key);
        iterator.seek(&target);
        match expected.get(position) {
            Some((key, _)) => assert_eq!(iterator.key(), key.as_slice(), "{order:?}: seek({target:?})"),
            None => assert!(!iterator.valid(), "{order:?}: seek({target:?}) found {:?}", iterator.key()),
        }
        // A step in each direction from the seek, across a change of direction.
        if iterator.valid() {
            iterator.prev();
            match position.checked_sub(1).and_then(|before| expected.get(before)) {
                Some((key, _)) => assert_eq!(iterator.key(), key.as_slice(), "{order:?}: prev after seek"),
                None => assert!(!iterator.valid(), "{order:?}: prev after seek"),
            }
            if iterator.valid() {
                iterator.next();
                assert_eq!(iterator.key(), expected[position].0.as_slice(), "{order:?}: next after prev");
            }
        }
        let at_or_before = expected.partition_point(|(key, _)| order.sort_key(key) <= target_sort_key);
        iterator.seek_for_prev(&target);
        match at_or_before.checked_sub(1).and_then(|index| expected.get(index)) {
            Some((key, _)) => assert_eq!(iterator.key(), key.as_slice(), "{order:?}: seek_for_prev({target:?})"),
            None => assert!(!iterator.valid(), "{order:?}: seek_for_prev({target:?})"),
        }
        iterator.status().expect("status");
    }
}

/// Two keys of the order, the first not after the second, for `compact_range`.
fn ordered_pair(order: Order, rng: &mut SmallRng) -> (Vec<u8>, Vec<u8>) {
    let first = order.key(rng.gen_range(0..500));
    let second = order.key(rng.gen_range(0..500));
    if order.sort_key(&first) <= order.sort_key(&second) {
        (first, second)
    } else {
        (second, first)
    }
}

/// A random workload on the default column family ordered by `order`, checked against the model
/// at every read and after every reopen.
fn run_model(order: Order, seed: u64, steps: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let memory = MemFileSystem::new();
    let path = Path::new("/model");
    let options = database_options(&memory, order);
    let mut db = Db::open(path, options.clone()).expect("open");
    let mut model = Model::new(order);
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..steps as u64 {
        let family = db.default_column_family();
        match rng.gen_range(0..100) {
            0..=37 => {
                let number = rng.gen_range(0..500);
                let value = value(number, step, rng.gen_range(0..100));
                db.put(&order.key(number), &value).expect("put");
                model.put(&order.key(number), &value);
            }
            38..=49 => {
                let number = rng.gen_range(0..500);
                db.delete(&order.key(number)).expect("delete");
                model.delete(&order.key(number));
            }
            50..=59 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..40) {
                    let number = rng.gen_range(0..500);
                    if rng.gen_bool(0.7) {
                        let value = value(number, step, rng.gen_range(0..60));
                        batch.put(&order.key(number), &value);
                        model.put(&order.key(number), &value);
                    } else {
                        batch.delete(&order.key(number));
                        model.delete(&order.key(number));
                    }
                }
                db.write(batch).expect("write");
            }
            60..=72 => {
                let number = rng.gen_range(0..500);
                let key = order.key(number);
                assert_eq!(db.get(&key).expect("get"), model.get(&key), "{order:?} seed {seed}: get({key:?})");
            }
            73..=78 => check_iteration(&db, &family, &model, None, &mut rng),
            79..=81 => {
                if snapshots.len() >= 3 {
                    snapshots.remove(0);
                }
                snapshots.push((db.snapshot(), model.clone()));
            }
            82..=86 => {
                if !snapshots.is_empty() {
                    let (snapshot, snapshot_model) = &snapshots[rng.gen_range(0..snapshots.len())];
                    let key = order.key(rng.gen_range(0..500));
                    let read = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
                    assert_eq!(db.get_opt(&key, &read).expect("get"), snapshot_model.get(&key), "{order:?}");
                    check_iteration(&db, &family, snapshot_model, Some(snapshot), &mut rng);
                }
            }
            87..=89 => db.flush().expect("flush"),
            90..=93 => {
                let (start, end) = ordered_pair(order, &mut rng);
                let start = rng.gen_bool(0.8).then_some(start);
                let end = rng.gen_bool(0.8).then_some(end);
                db.compact_range(&family, start.as_deref(), end.as_deref()).expect("compact_range");
            }
            94 => db.compact_all().expect("compact_all"),
            95..=96 => {
                snapshots.clear();
                db.close().expect("close");
                db = Db::open(path, options.clone()).expect("reopen");
            }
            _ => db.wait_for_background_work().expect("wait"),
        }
    }
    let family = db.default_column_family();
    assert_eq!(scan(&db, &family, &ReadOptions::default()), model.view(None, None), "{order:?} seed {seed}");
    // The workload must have built a tree, or the test proves little about tables.
    let files = db.level_file_counts();
    assert!(files.iter().skip(1).sum::<usize>() > 0, "{order:?}: no table below level 0 ({files:?})");
    snapshots.clear();
    db.close().expect("close");
    let db = Db::open(path, options).expect("final reopen");
    let family = db.default_column_family();
    assert_eq!(scan(&db, &family, &ReadOptions::default()), model.view(None, None), "{order:?} after reopen");
    let mut rng = SmallRng::seed_from_u64(seed + 1000);
    for _ in 0..20 {
        check_iteration(&db, &family, &model, None, &mut rng);
    }
}

#[test]
fn model_reverse_bytewise() {
    for seed in 0..3 {
        run_model(Order::Reverse, seed, 2500);
    }
}

#[test]
fn model_integer_suffix_order() {
    for seed in 10..13 {
        run_model(Order::Suffix, seed, 2500);
    }
}

#[test]
fn model_length_then_bytes_order() {
    for seed in 20..23 {
        run_model(Order::LengthThenBytes, seed, 2500);
    }
}

#[test]
fn model_bytewise_through_the_same_harness() {
    // The harness itself, run in the order every other test of the engine uses.
    run_model(Order::Bytewise, 30, 2500);
}

#[test]
fn column_families_of_different_orders_share_a_database() {
    let memory = MemFileSystem::new();
    let path = Path::new("/shared");
    let options = database_options(&memory, Order::Bytewise);
    let listed = || {
        vec![
            ("reverse".to_string(), column_family_options(Order::Reverse)),
            ("suffix".to_string(), column_family_options(Order::Suffix)),
        ]
    };
    // "reverse" is created at open from the list, "suffix" by `create_column_family`.
    let mut db = Db::open_with_column_families(path, options.clone(), listed()[..1].to_vec()).expect("open");
    db.create_column_family("suffix", column_family_options(Order::Suffix)).expect("create suffix");
    let orders = [("default", Order::Bytewise), ("reverse", Order::Reverse), ("suffix", Order::Suffix)];
    let mut models: Vec<Model> = orders.iter().map(|(_, order)| Model::new(*order)).collect();
    let mut rng = SmallRng::seed_from_u64(77);
    for round in 0..6u64 {
        for step in 0..1500u64 {
            // One batch spans all three column families, so inserts into memtables of
            // different orders happen together.
            let mut batch = WriteBatch::new();
            for (index, (name, order)) in orders.iter().enumerate() {
                let family = db.column_family(name).expect("family");
                for _ in 0..rng.gen_range(0..3) {
                    let number = rng.gen_range(0..600);
                    let key = order.key(number);
                    if rng.gen_bool(0.8) {
                        let value = value(number, round * 10_000 + step, rng.gen_range(0..80));
                        batch.put_cf(&family, &key, &value);
                        models[index].put(&key, &value);
                    } else {
                        batch.delete_cf(&family, &key);
                        models[index].delete(&key);
                    }
                }
            }
            db.write(batch).expect("write");
        }
        for (index, (name, order)) in orders.iter().enumerate() {
            let family = db.column_family(name).expect("family");
            if round % 2 == 1 {
                let (start, end) = ordered_pair(*order, &mut rng);
                db.compact_range(&family, Some(&start), Some(&end)).expect("compact_range");
            }
            assert_eq!(scan(&db, &family, &ReadOptions::default()), models[index].view(None, None), "{name}");
            for _ in 0..5 {
                check_iteration(&db, &family, &models[index], None, &mut rng);
            }
            for number in (0..600).step_by(7) {
                let key = order.key(number);
                assert_eq!(db.get_cf(&family, &key).expect("get"), models[index].get(&key), "{name} {number}");
            }
        }
        db.close().expect("close");
        db = Db::open_with_column_families(path, options.clone(), listed()).expect("reopen");
    }
    for (index, (name, _)) in orders.iter().enumerate() {
        let family = db.column_family(name).expect("family");
        assert_eq!(scan(&db, &family, &ReadOptions::default()), models[index].view(None, None), "{name}");
        let options = db.column_family_options(&family).expect("options");
        assert_eq!(options.comparator.name(), orders[index].1.comparator().name());
    }
    db.compact_all().expect("compact_all");
    let stats = db.stats();
    for (index, (name, _)) in orders.iter().enumerate() {
        let family_stats = stats.column_families.iter().find(|family| family.name == *name).expect("stats");
        assert_eq!(family_stats.comparator, orders[index].1.comparator().name(), "{name}");
        assert!(stats.to_string().contains(&format!("({name}, {})", family_stats.comparator)), "{stats}");
        let deep_files: usize = family_stats.levels.iter().skip(1).map(|level| level.files).sum();
        assert!(deep_files > 0, "{name}: compaction left nothing below level 0");
        let family = db.column_family(name).expect("family");
        assert_eq!(scan(&db, &family, &ReadOptions::default()), models[index].view(None, None), "{name}");
    }
}

/// The names of the files in the database directory.
fn file_names(memory: &MemFileSystem, path: &Path) -> BTreeSet<String> {
    memory.file_names(path).into_iter().collect()
}

#[test]
fn a_comparator_of_another_name_is_refused_at_open_and_changes_nothing() {
    let memory = MemFileSystem::new();
    let path = Path::new("/mismatch");
    let reverse_options = database_options(&memory, Order::Reverse);
    let listed = vec![("lengths".to_string(), column_family_options(Order::LengthThenBytes))];
    let db = Db::open_with_column_families(path, reverse_options.clone(), listed.clone()).expect("open");
    let lengths = db.column_family("lengths").expect("lengths");
    let mut default_model = Model::new(Order::Reverse);
    let mut lengths_model = Model::new(Order::LengthThenBytes);
    for number in 0..400 {
        db.put(&Order::Reverse.key(number), &value(number, 1, 30)).expect("put");
        default_model.put(&Order::Reverse.key(number), &value(number, 1, 30));
        if number % 2 == 0 {
            db.put_cf(&lengths, &Order::LengthThenBytes.key(number), b"v").expect("put");
            lengths_model.put(&Order::LengthThenBytes.key(number), b"v");
        }
    }
    db.flush().expect("flush");
    // Data in the logs as well as in tables: a refused open must not replay it.
    db.put(b"unflushed", b"x").expect("put");
    default_model.put(b"unflushed", b"x");
    drop(lengths);
    db.close().expect("close");
    let files_before = file_names(&memory, path);

    // The default column family was created reverse; the default options say bytewise.
    let bytewise_options = database_options(&memory, Order::Bytewise);
    assert_invalid(
        Db::open_with_column_families(path, bytewise_options, listed.clone()),
        &["default", "riptide.reverse_bytewise", "riptide.bytewise"],
    );
    // "lengths" is not listed, so it would get the default options' comparator (reverse).
    assert_invalid(
        Db::open(path, reverse_options.clone()),
        &["lengths", "test.length_then_bytes", "riptide.reverse_bytewise"],
    );
    // Listed with a third order.
    let wrong = vec![("lengths".to_string(), column_family_options(Order::Suffix))];
    assert_invalid(
        Db::open_with_column_families(path, reverse_options.clone(), wrong),
        &["lengths", "test.length_then_bytes", "test.integer_suffix"],
    );
    assert_eq!(file_names(&memory, path), files_before, "a refused open changed the directory");

    let db = Db::open_with_column_families(path, reverse_options, listed).expect("open with the right orders");
    let lengths = db.column_family("lengths").expect("lengths");
    assert_eq!(scan(&db, &db.default_column_family(), &ReadOptions::default()), default_model.view(None, None));
    assert_eq!(scan(&db, &lengths, &ReadOptions::default()), lengths_model.view(None, None));
}

#[test]
fn the_comparator_cannot_change_while_the_database_runs() {
    let memory = MemFileSystem::new();
    let db = Db::open(Path::new("/running"), database_options(&memory, Order::Bytewise)).expect("open");
    let family = db.create_column_family("suffix", column_family_options(Order::Suffix)).expect("create");
    let original = db.column_family_options(&family).expect("options");

    let mut other_order = original.clone();
    other_order.comparator = Order::Reverse.comparator();
    assert_invalid(
        db.set_column_family_options(&family, other_order),
        &["test.integer_suffix", "riptide.reverse_bytewise"],
    );
    let mut to_bytewise = original.clone();
    to_bytewise.comparator = Arc::new(BytewiseComparator);
    assert_invalid(db.set_column_family_options(&family, to_bytewise), &["suffix"]);
    let default = db.default_column_family();
    let mut default_options = db.column_family_options(&default).expect("options");
    default_options.comparator = Order::Reverse.comparator();
    assert_invalid(db.set_column_family_options(&default, default_options), &["riptide.bytewise"]);
    assert_eq!(db.column_family_options(&family).expect("options"), original);

    // Another instance of the same order (same name) is accepted with the other changes.
    let mut same_order = original.clone();
    same_order.comparator = Arc::new(SuffixComparator);
    same_order.memtable_size_bytes = 16 << 10;
    db.set_column_family_options(&family, same_order.clone()).expect("same comparator, other sizes");
    assert_eq!(db.column_family_options(&family).expect("options"), same_order);

    // A nameless comparator is invalid wherever options are checked.
    let mut nameless = original.clone();
    nameless.comparator = Arc::new(NamelessComparator);
    assert_invalid(db.create_column_family("nameless", nameless.clone()), &["comparator"]);
    assert_invalid(db.set_column_family_options(&family, nameless), &["comparator"]);
    let nameless_database =
        Options { comparator: Arc::new(NamelessComparator), ..database_options(&memory, Order::Bytewise) };
    assert_invalid(Db::open(Path::new("/nameless"), nameless_database), &["comparator"]);
}

#[test]
fn debug_output_names_the_comparator() {
    let options = column_family_options(Order::Suffix);
    assert!(format!("{options:?}").contains("test.integer_suffix"));
    let database = Options { comparator: Arc::new(ReverseBytewiseComparator), ..Options::default() };
    assert!(format!("{database:?}").contains("riptide.reverse_bytewise"));
    // Equality compares comparators by name.
    let mut same = options.clone();
    same.comparator = Arc::new(SuffixComparator);
    assert_eq!(options, same);
    same.comparator = Arc::new(LengthThenBytesComparator);
    assert_ne!(options, same);
}

#[test]
fn range_queries_follow_the_order() {
    let memory = MemFileSystem::new();
    // A memtable that holds every key, so that the first estimate counts memtable entries.
    let options = Options { memtable_size_bytes: 1 << 20, ..database_options(&memory, Order::Reverse) };
    let db = Db::open(Path::new("/ranges"), options).expect("open");
    let family = db.default_column_family();
    for number in 0..2000 {
        db.put(&common::key(number), &value(number, 0, 40)).expect("put");
    }
    // In reverse order "key001500" comes before "key000500".
    let (high, low) = (common::key(1500), common::key(500));
    // A short range is counted, a long one estimated from the skiplist, both in the order.
    // (A sample needs 8 nodes; its estimate is within 8x but for about one range in 100,000.)
    let short = db.approximate_range_stats(&family, &common::key(1007), &common::key(1000)).expect("stats");
    assert_eq!(short.memtable_entries, 7, "{short:?}");
    let hundred = db.approximate_range_stats(&family, &common::key(1100), &common::key(1000)).expect("stats");
    assert!((13..=800).contains(&hundred.memtable_entries), "{hundred:?}");
    let in_memory = db.approximate_range_stats(&family, &high, &low).expect("stats");
    assert!((125..=8000).contains(&in_memory.memtable_entries), "{in_memory:?}");
    assert_eq!(db.approximate_range_stats(&family, &low, &high).expect("stats").entries(), 0);
    db.flush().expect("flush");
    db.compact_all().expect("compact_all");
    let on_disk = db.approximate_range_stats(&family, &high, &low).expect("stats");
    assert!(on_disk.table_bytes > 0 && on_disk.table_entries > 0, "{on_disk:?}");
    assert_eq!(db.approximate_range_stats(&family, &low, &high).expect("stats"), Default::default());
    assert!(db.approximate_size_bytes(&high, &low).expect("size") > 0);
    assert_eq!(db.approximate_size_bytes(&low, &high).expect("size"), 0);

    // Bounds are in the same order: from "key001500" down to just above "key000500".
    let options = ReadOptions { lower_bound: Some(high.clone()), upper_bound: Some(low.clone()), ..Default::default() };
    let keys: Vec<Vec<u8>> = scan(&db, &family, &options).into_iter().map(|(key, _)| key).collect();
    let expected: Vec<Vec<u8>> = (501..=1500).rev().map(common::key).collect();
    assert_eq!(keys, expected);

    // Compacting a range of the order rewrites it, and deletions in it are gone for good.
    for number in 800..900 {
        db.delete(&common::key(number)).expect("delete");
    }
    db.compact_range(&family, Some(&common::key(899)), Some(&common::key(800))).expect("compact_range");
    assert_eq!(db.get(&common::key(850)).expect("get"), None);
    assert_eq!(db.get(&common::key(799)).expect("get"), Some(value(799, 0, 40)));
}

#[test]
fn compact_range_walks_a_range_of_the_order_in_bounded_steps() {
    // Automatic compactions are off (level 0 never triggers, level targets are never exceeded,
    // tombstone density is ignored), so only `compact_range` moves data, and its last-level
    // rewrites are capped at 25 files of 4 KiB each: the range takes many jobs, each resuming
    // after the largest key of the one before, in reverse order.
    let memory = MemFileSystem::new();
    let options = Options {
        memtable_size_bytes: 64 << 10,
        target_file_size_bytes: 4096,
        base_level_size_bytes: 1 << 30,
        level0_compaction_trigger_files: 100,
        level0_slowdown_writes_files: 200,
        level0_stop_writes_files: 300,
        tombstone_compaction_ratio: 0.0,
        ..database_options(&memory, Order::Reverse)
    };
    let db = Db::open(Path::new("/steps"), options).expect("open");
    let family = db.default_column_family();
    let count = 6000;
    for number in 0..count {
        db.put(&common::key(number), &value(number, 0, 100)).expect("put");
    }
    let (first, last) = (common::key(count - 1), common::key(0));
    db.compact_range(&family, Some(&first), Some(&last)).expect("compact_range");
    // A snapshot keeps every put and its tombstone through the next pass, so the last level
    // ends up holding deletions.
    let snapshot = db.snapshot();
    for number in 0..count {
        db.delete(&common::key(number)).expect("delete");
    }
    db.compact_range(&family, Some(&first), Some(&last)).expect("compact_range under a snapshot");
    let read = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::default() };
    assert_eq!(db.get_opt(&common::key(1234), &read).expect("get"), Some(value(1234, 0, 100)));
    let files = db.level_file_counts();
    assert!(files[6] > 25, "the last level must hold more than one job's worth: {files:?}");
    assert_eq!(files.iter().take(6).sum::<usize>(), 0, "{files:?}");
    drop(read);
    drop(snapshot);

    // Now every entry is invisible: a pass over the whole range in the column family's order
    // must rewrite every file, leaving nothing.
    let jobs_before = db.stats().manual_compactions;
    db.compact_range(&family, Some(&first), Some(&last)).expect("compact_range");
    assert!(db.stats().manual_compactions > jobs_before + 1, "the pass took a single job");
    assert_eq!(db.level_file_counts(), vec![0; 7], "compact_range stopped before the end of its range");
    assert!(scan(&db, &family, &ReadOptions::default()).is_empty());
}

#[test]
fn a_manifest_without_comparators_per_column_family_opens_as_bytewise() {
    use riptide::internals::encode;
    // A manifest as every build wrote it before comparators were recorded per column family:
    // the global comparator tag, the counters, and nothing else.
    let memory = MemFileSystem::new();
    let path = Path::new("/old");
    memory.create_dir_all(path).expect("mkdir");
    let edit = encode::version_edit(Some("riptide.bytewise"), Some((0, 5, 0)), &[], &[]);
    let manifest = encode::log(&[edit]).expect("manifest");
    let write = |name: &str, bytes: &[u8]| {
        let mut file = memory.create(&path.join(name)).expect("create");
        file.append(bytes).expect("append");
        file.sync().expect("sync");
    };
    write("MANIFEST-000002", &manifest);
    write("CURRENT", b"MANIFEST-000002\n");
    memory.sync_dir(path).expect("sync dir");

    assert_invalid(Db::open(path, database_options(&memory, Order::Reverse)), &["riptide.bytewise"]);
    let db = Db::open(path, database_options(&memory, Order::Bytewise)).expect("open the old manifest");
    for number in 0..300 {
        db.put(&common::key(number), b"v").expect("put");
    }
    db.close().expect("close");
    // The database still holds only bytewise column families, so nothing per column family
    // was recorded, and the other order is still refused.
    assert_invalid(Db::open(path, database_options(&memory, Order::Reverse)), &["riptide.reverse_bytewise"]);
    let db = Db::open(path, database_options(&memory, Order::Bytewise)).expect("reopen");
    let keys: Vec<Vec<u8>> =
        scan(&db, &db.default_column_family(), &ReadOptions::default()).into_iter().map(|(key, _)| key).collect();
    assert_eq!(keys, (0..300).map(common::key).collect::<Vec<_>>());
}
