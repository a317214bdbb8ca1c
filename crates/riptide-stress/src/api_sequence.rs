//! An API call sequence decoded from arbitrary bytes, run against the engine on a
//! `MemFileSystem` and against a `BTreeMap`: the body of the `api_sequence` fuzz target.
//!
//! Each operation takes one byte for its kind and a few more for its arguments; keys come from
//! a small alphabet so that short inputs overwrite, delete and scan the same keys often, and
//! values can be long (a length byte times 37) so that a short input still fills tiny
//! memtables. Running out of bytes ends the sequence; then the whole database is compared with
//! the model, closed, reopened and compared again.
//!
//! Concurrency contract: single-threaded, apart from the engine's own threads.
//!
//! Invariants: [`run`] returns `Err` only for a difference from the model or an engine error;
//! it never panics on any input.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use riptide::fs::{MemFileSystem, PowerLossMode};
use riptide::{Compression, Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One atomic write: puts (`Some`) and deletes (`None`) in order.
type Write = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn apply(model: &mut Model, write: &Write) {
    for (key, value) in write {
        match value {
            Some(value) => model.insert(key.clone(), value.clone()),
            None => model.remove(key),
        };
    }
}

/// Records that everything written so far is durable.
fn mark_durable(durable_model: &mut Model, since_durable: &mut Vec<Write>, model: &Model) {
    durable_model.clone_from(model);
    since_durable.clear();
}

/// Reads the input a byte at a time; exhausted input reads as `None`.
struct Input<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let byte = self.bytes.get(self.position).copied();
        self.position += 1;
        byte
    }

    /// A key of zero to three letters from a six-letter alphabet.
    fn key(&mut self) -> Option<Vec<u8>> {
        let selector = self.byte()?;
        let length = usize::from(selector % 4);
        let mut key = Vec::with_capacity(length);
        let mut bits = selector / 4;
        for _ in 0..length {
            key.push(b'a' + bits % 6);
            bits /= 6;
        }
        Some(key)
    }

    /// A value: a length byte times 37, filled from a second byte.
    fn value(&mut self) -> Option<Vec<u8>> {
        let length = usize::from(self.byte()?) * 37;
        let fill = self.byte()?;
        Some((0..length).map(|position| fill.wrapping_add(position as u8)).collect())
    }
}

fn options(file_system: &MemFileSystem, compression_byte: u8) -> Options {
    let compressions = [Compression::None, Compression::Lz4, Compression::Zstd, Compression::Snappy];
    Options {
        file_system: Arc::new(file_system.clone()),
        memtable_size_bytes: 4096,
        block_size_bytes: 256,
        block_restart_interval: 1 + usize::from(compression_byte % 7),
        bloom_bits_per_key: if compression_byte & 0x80 == 0 { 10 } else { 0 },
        compression: compressions[usize::from(compression_byte) % compressions.len()],
        block_cache_size_bytes: 16 << 10,
        target_file_size_bytes: 4096,
        level0_compaction_trigger_files: 2,
        level0_slowdown_writes_files: 5,
        level0_stop_writes_files: 6,
        max_open_tables: 16,
        ..Options::default()
    }
}

fn scan(db: &Db, options: &ReadOptions) -> Result<Model, String> {
    let mut iterator = db.iter(options).map_err(|error| format!("iter: {error}"))?;
    let mut out = Model::new();
    iterator.seek_to_first();
    while iterator.valid() {
        out.insert(iterator.key().to_vec(), iterator.value().to_vec());
        iterator.next();
    }
    iterator.status().map_err(|error| format!("scan: {error}"))?;
    Ok(out)
}

fn in_bounds(key: &[u8], lower: &Option<Vec<u8>>, upper: &Option<Vec<u8>>) -> bool {
    lower.as_ref().is_none_or(|lower| key >= lower.as_slice())
        && upper.as_ref().is_none_or(|upper| key < upper.as_slice())
}

/// Runs the sequence encoded in `data`. `Err` describes a difference from the model.
pub fn run(data: &[u8]) -> Result<(), String> {
    let path = Path::new("/api");
    let memory = MemFileSystem::new();
    let mut input = Input { bytes: data, position: 0 };
    let options = options(&memory, input.byte().unwrap_or(0));
    let mut db = Db::open(path, options.clone()).map_err(|error| format!("open: {error}"))?;
    let mut model = Model::new();
    // The state every write up to the last synced one (or flush, or close) left: what a power
    // loss must keep.
    let mut durable_model = Model::new();
    // Every write since that point, in order.
    let mut since_durable: Vec<Write> = Vec::new();
    let mut snapshot: Option<(Snapshot, Model)> = None;
    let mut step = 0usize;
    while let Some(kind) = input.byte() {
        step += 1;
        let fail = |what: &str, error: riptide::Error| format!("step {step}: {what}: {error}");
        match kind % 12 {
            0 | 1 => {
                let (Some(key), Some(value)) = (input.key(), input.value()) else { break };
                let sync = kind & 0x80 != 0;
                db.put_opt(&key, &value, &WriteOptions { sync }).map_err(|error| fail("put", error))?;
                since_durable.push(vec![(key.clone(), Some(value.clone()))]);
                model.insert(key, value);
                if sync {
                    mark_durable(&mut durable_model, &mut since_durable, &model);
                }
            }
            2 => {
                let Some(key) = input.key() else { break };
                db.delete(&key).map_err(|error| fail("delete", error))?;
                since_durable.push(vec![(key.clone(), None)]);
                model.remove(&key);
            }
            3 => {
                let Some(count) = input.byte() else { break };
                let mut batch = WriteBatch::new();
                let mut write: Write = Vec::new();
                for _ in 0..count % 8 {
                    let Some(key) = input.key() else { break };
                    if input.byte().unwrap_or(0).is_multiple_of(3) {
                        batch.delete(&key);
                        write.push((key, None));
                    } else {
                        let value = input.value().unwrap_or_default();
                        batch.put(&key, &value);
                        write.push((key, Some(value)));
                    }
                }
                db.write(batch).map_err(|error| fail("batch", error))?;
                apply(&mut model, &write);
                since_durable.push(write);
            }
            4 | 5 => {
                let Some(key) = input.key() else { break };
                let at_snapshot = kind & 0x80 != 0 && snapshot.is_some();
                let (read_options, source) = match (&snapshot, at_snapshot) {
                    (Some((handle, frozen)), true) => {
                        (ReadOptions { snapshot: Some(handle.clone()), ..ReadOptions::default() }, frozen)
                    }
                    _ => (ReadOptions::default(), &model),
                };
                let value = db.get_opt(&key, &read_options).map_err(|error| fail("get", error))?;
                if value.as_ref() != source.get(&key) {
                    return Err(format!(
                        "step {step}: get {key:?} read {value:?}, the model has {:?}",
                        source.get(&key)
                    ));
                }
            }
            6 => {
                let (Some(lower), Some(upper), Some(flags)) = (input.key(), input.key(), input.byte()) else { break };
                let lower = (flags & 1 != 0).then_some(lower);
                let upper = (flags & 2 != 0).then_some(upper);
                let at_snapshot = flags & 4 != 0 && snapshot.is_some();
                let (handle, source) = match (&snapshot, at_snapshot) {
                    (Some((handle, frozen)), true) => (Some(handle.clone()), frozen),
                    _ => (None, &model),
                };
                let read_options = ReadOptions {
                    snapshot: handle,
                    lower_bound: lower.clone(),
                    upper_bound: upper.clone(),
                    ..ReadOptions::default()
                };
                let mut iterator = db.iter(&read_options).map_err(|error| fail("iter", error))?;
                let expected: Vec<(&Vec<u8>, &Vec<u8>)> =
                    source.iter().filter(|(key, _)| in_bounds(key, &lower, &upper)).collect();
                let backward = flags & 8 != 0;
                let mut seen = Vec::new();
                if backward {
                    iterator.seek_to_last();
                } else {
                    iterator.seek_to_first();
                }
                while iterator.valid() {
                    seen.push((iterator.key().to_vec(), iterator.value().to_vec()));
                    if backward {
                        iterator.prev();
                    } else {
                        iterator.next();
                    }
                }
                iterator.status().map_err(|error| fail("scan", error))?;
                if backward {
                    seen.reverse();
                }
                let matches = seen.len() == expected.len()
                    && seen
                        .iter()
                        .zip(&expected)
                        .all(|((key, value), (model_key, model_value))| key == *model_key && value == *model_value);
                if !matches {
                    return Err(format!(
                        "step {step}: scan [{lower:?}, {upper:?}) {} found {} entries, the model has {}",
                        if backward { "backward" } else { "forward" },
                        seen.len(),
                        expected.len()
                    ));
                }
            }
            7 => snapshot = Some((db.snapshot(), model.clone())),
            8 => snapshot = None,
            9 => {
                db.flush().map_err(|error| fail("flush", error))?;
                mark_durable(&mut durable_model, &mut since_durable, &model);
            }
            10 => {
                if kind & 0x80 != 0 {
                    db.compact_all().map_err(|error| fail("compact_all", error))?;
                    mark_durable(&mut durable_model, &mut since_durable, &model);
                } else {
                    db.wait_for_background_work().map_err(|error| fail("wait", error))?;
                }
            }
            _ => {
                snapshot = None;
                if kind & 0x80 != 0 {
                    // The machine loses power: what was durable survives, and possibly some of
                    // the writes after it, in order (a memtable switch syncs the old log).
                    drop(db);
                    memory.simulate_power_loss(PowerLossMode::DropUnsynced);
                    db = Db::open(path, options.clone()).map_err(|error| fail("open after power loss", error))?;
                    let actual = scan(&db, &ReadOptions::default())?;
                    let mut candidate = durable_model.clone();
                    let mut found = candidate == actual;
                    for write in &since_durable {
                        apply(&mut candidate, write);
                        found = found || candidate == actual;
                    }
                    if !found {
                        return Err(format!(
                            "step {step}: after power loss the database ({} keys) is no prefix of the {} writes since \
                             the last durable point",
                            actual.len(),
                            since_durable.len()
                        ));
                    }
                    model = actual;
                    mark_durable(&mut durable_model, &mut since_durable, &model);
                } else {
                    db.close().map_err(|error| fail("close", error))?;
                    db = Db::open(path, options.clone()).map_err(|error| fail("reopen", error))?;
                    mark_durable(&mut durable_model, &mut since_durable, &model);
                }
            }
        }
    }
    // A snapshot must not outlive the handle it was taken from.
    drop(snapshot);
    let actual = scan(&db, &ReadOptions::default())?;
    if actual != model {
        return Err(format!("at the end: the database holds {} keys, the model {}", actual.len(), model.len()));
    }
    db.close().map_err(|error| format!("final close: {error}"))?;
    let db = Db::open(path, options).map_err(|error| format!("final reopen: {error}"))?;
    let actual = scan(&db, &ReadOptions::default())?;
    if actual != model {
        return Err(format!("after reopen: the database holds {} keys, the model {}", actual.len(), model.len()));
    }
    Ok(())
}
