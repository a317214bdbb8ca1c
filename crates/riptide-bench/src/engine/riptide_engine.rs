//! Riptide behind the [`Engine`] interface.
//!
//! Options: the memtable and block cache sizes of the run, LZ4, 10 bloom bits per key (or no
//! filter), 4 KiB blocks, WAL without background sync ([`SyncMode::None`]); `--sync` makes every
//! write a synced write (`WriteOptions { sync: true }`), shared by group commit.
//!
//! For tuning experiments, the environment variable `RIPTIDE_BENCH_TUNING` overrides compaction
//! and background options, e.g. `max_background_compactions=1,compaction_priority=round_robin`;
//! the report's configuration dump shows the options a run really used.

use std::path::Path;

use riptide::{
    CompactionPriority, Compression, Db, DbIterator, Options, ReadOptions, SyncMode, WriteBatch, WriteOptions,
};

use super::{Engine, EngineSettings, ScanOutcome, Session, WriteStalls, BLOCK_SIZE_BYTES, BLOOM_BITS_PER_KEY};
use crate::error::{BenchError, Context, Result};

/// The environment variable holding tuning overrides (see the module documentation).
pub const TUNING_VARIABLE: &str = "RIPTIDE_BENCH_TUNING";

/// The Riptide options for `settings`, with the overrides of [`TUNING_VARIABLE`] applied.
pub fn options(settings: &EngineSettings) -> Result<Options> {
    let mut options = Options {
        memtable_size_bytes: settings.memtable_size_bytes,
        block_cache_size_bytes: settings.block_cache_size_bytes,
        max_memory_bytes: settings.max_memory_bytes as u64,
        bloom_bits_per_key: if settings.bloom { BLOOM_BITS_PER_KEY } else { 0 },
        block_size_bytes: BLOCK_SIZE_BYTES,
        compression: Compression::Lz4,
        wal_sync_mode: SyncMode::None,
        ..Options::default()
    };
    if let Ok(tuning) = std::env::var(TUNING_VARIABLE) {
        apply_tuning(&mut options, &tuning).with_context(|| format!("reading {TUNING_VARIABLE}={tuning:?}"))?;
    }
    Ok(options)
}

/// Applies comma-separated `name=value` overrides to `options`; an unknown name or a value
/// that does not parse is an error, so a typo never runs a benchmark with the defaults.
fn apply_tuning(options: &mut Options, tuning: &str) -> Result<()> {
    for setting in tuning.split(',').map(str::trim).filter(|setting| !setting.is_empty()) {
        let (name, value) =
            setting.split_once('=').ok_or_else(|| BenchError::new(format!("{setting:?} is not name=value")))?;
        let number = || value.parse::<u64>().map_err(|_| BenchError::new(format!("{name}: {value:?} is not a number")));
        match name {
            "max_background_compactions" => options.max_background_compactions = number()? as usize,
            "max_background_flushes" => options.max_background_flushes = number()? as usize,
            "max_subcompactions" => options.max_subcompactions = number()? as usize,
            "level_size_ratio" => options.level_size_ratio = number()?,
            "base_level_size_bytes" => options.base_level_size_bytes = number()?,
            "target_file_size_bytes" => options.target_file_size_bytes = number()?,
            "level0_compaction_trigger_files" => options.level0_compaction_trigger_files = number()? as usize,
            "level0_slowdown_writes_files" => options.level0_slowdown_writes_files = number()? as usize,
            "level0_stop_writes_files" => options.level0_stop_writes_files = number()? as usize,
            "compaction_priority" => {
                options.compaction_priority = match value {
                    "min_overlapping_ratio" => CompactionPriority::MinOverlappingRatio,
                    "round_robin" => CompactionPriority::RoundRobin,
                    _ => return Err(BenchError::new(format!("compaction_priority: unknown {value:?}"))),
                }
            }
            _ => return Err(BenchError::new(format!("unknown tuning option {name:?}"))),
        }
    }
    Ok(())
}

/// An open Riptide database.
pub struct RiptideEngine {
    db: Db,
    options: Options,
    write_options: WriteOptions,
}

impl RiptideEngine {
    /// Opens (creating) the database in `path`.
    pub fn open(path: &Path, settings: &EngineSettings) -> Result<RiptideEngine> {
        let options = options(settings)?;
        let db = Db::open(path, options.clone()).with_context(|| format!("opening Riptide in {}", path.display()))?;
        Ok(RiptideEngine { db, options, write_options: WriteOptions { sync: settings.sync } })
    }

    /// The underlying database (for tests).
    pub fn db(&self) -> &Db {
        &self.db
    }
}

impl Engine for RiptideEngine {
    type Session<'a> = RiptideSession<'a>;

    fn session(&self) -> Result<RiptideSession<'_>> {
        Ok(RiptideSession { engine: self, batch: WriteBatch::new(), read_options: ReadOptions::default() })
    }

    fn settle(&self) -> Result<()> {
        self.db.flush().context("flushing Riptide")?;
        self.db.wait_for_background_work().context("waiting for Riptide's background work")?;
        Ok(())
    }

    fn configuration(&self) -> String {
        format!(
            "riptide {}\n{:#?}\nwrite options: WAL on; WriteOptions {{ sync: true }} only in --sync runs (the sync_* \
             tests); one WriteBatch per batch, put/delete for batches of one",
            env!("CARGO_PKG_VERSION"),
            self.options
        )
    }

    fn statistics(&self) -> String {
        self.db.stats().to_string()
    }

    fn write_stalls(&self) -> Option<WriteStalls> {
        // Riptide counts each write that waited for a memtable slot or for level 0 to shrink
        // (stops), and each write group it delayed once level 0 reached its slowdown trigger;
        // both are time writes were held back, as RocksDB's cumulative stall counts both.
        let stats = self.db.stats();
        Some(WriteStalls {
            stall_micros: stats.write_stall_micros + stats.write_slowdown_micros,
            stall_count: stats.write_stall_count + stats.write_slowdown_count,
        })
    }

    fn close(self) -> Result<()> {
        self.db.close().context("closing Riptide")
    }
}

/// A thread's handle on a [`RiptideEngine`].
pub struct RiptideSession<'a> {
    engine: &'a RiptideEngine,
    batch: WriteBatch,
    read_options: ReadOptions,
}

impl Session for RiptideSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.engine.db.put_opt(key, value, &self.engine.write_options)?)
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        Ok(self.engine.db.delete_opt(key, &self.engine.write_options)?)
    }

    fn batch_put(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
    }

    fn batch_delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
    }

    fn commit_batch(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        Ok(self.engine.db.write_opt(batch, &self.engine.write_options)?)
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.engine.db.get_opt(key, &self.read_options)?.map(|value| value.len()))
    }

    fn scan(&mut self, start: &[u8], limit: usize) -> Result<ScanOutcome> {
        let mut iterator: DbIterator = self.engine.db.iter(&self.read_options)?;
        iterator.seek(start);
        let mut outcome = ScanOutcome::default();
        while iterator.valid() {
            outcome.entries += 1;
            outcome.bytes += (iterator.key().len() + iterator.value().len()) as u64;
            if outcome.entries >= limit as u64 {
                break;
            }
            iterator.next();
        }
        iterator.status()?;
        Ok(outcome)
    }
}
