//! RocksDB behind the [`Engine`] interface, configured as a fair peer of Riptide.
//!
//! The options mirror Riptide's (see [`super::rocksdb_settings_text`] for the list): LZ4,
//! full bloom filters at 10 bits per key, an LRU block cache of the same size, 4 KiB blocks,
//! 64 MiB write buffers with up to two immutable ones, 2 background jobs on this 2-core
//! machine, dynamic level sizes, WAL on and synced only with `--sync`.

use std::path::{Path, PathBuf};

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, Options, ReadOptions, WaitForCompactOptions, WriteBatch,
    WriteBufferManager, WriteOptions, DB,
};

use super::rocksdb_properties::{
    parse_cumulative_stall_micros, parse_stall_condition_counts, CF_WRITE_STALL_PROPERTY, DB_STATS_PROPERTY,
};
use super::{
    rocksdb_settings_text, Engine, EngineSettings, ScanOutcome, Session, WriteStalls, BLOCK_SIZE_BYTES,
    BLOOM_BITS_PER_KEY, ROCKSDB_BACKGROUND_JOBS,
};
use crate::error::{Context, Result};

/// An open RocksDB database.
pub struct RocksDbEngine {
    db: DB,
    path: PathBuf,
    settings: EngineSettings,
    write_options: WriteOptions,
    // The cache (and the write buffer manager charging it) must outlive the database.
    _cache: Cache,
    _write_buffer_manager: Option<WriteBufferManager>,
}

impl RocksDbEngine {
    /// Opens (creating) the database in `path`.
    pub fn open(path: &Path, settings: &EngineSettings) -> Result<RocksDbEngine> {
        // Under a memory budget, the cache has the whole budget as its capacity, memtables are
        // charged to it by a write buffer manager (which stalls writers past its limit), and
        // index and filter blocks live in it: RocksDB's way of bounding memory by one number.
        let budget = settings.max_memory_bytes;
        let cache = Cache::new_lru_cache(if budget > 0 { budget } else { settings.block_cache_size_bytes });
        let write_buffer_manager = (budget > 0)
            .then(|| WriteBufferManager::new_write_buffer_manager_with_cache(budget / 2, true, cache.clone()));
        let mut table_options = BlockBasedOptions::default();
        table_options.set_block_size(BLOCK_SIZE_BYTES);
        table_options.set_block_cache(&cache);
        if budget > 0 {
            table_options.set_cache_index_and_filter_blocks(true);
        }
        if settings.bloom {
            table_options.set_bloom_filter(f64::from(BLOOM_BITS_PER_KEY), false);
        }
        let mut options = Options::default();
        options.create_if_missing(true);
        options.increase_parallelism(ROCKSDB_BACKGROUND_JOBS);
        options.set_max_background_jobs(ROCKSDB_BACKGROUND_JOBS);
        options.set_level_compaction_dynamic_level_bytes(true);
        options.set_write_buffer_size(settings.memtable_size_bytes);
        options.set_max_write_buffer_number(3);
        options.set_compression_type(DBCompressionType::Lz4);
        options.set_max_open_files(1000);
        options.set_block_based_table_factory(&table_options);
        if let Some(manager) = &write_buffer_manager {
            options.set_write_buffer_manager(manager);
        }
        let db = DB::open(&options, path).with_context(|| format!("opening RocksDB in {}", path.display()))?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(settings.sync);
        Ok(RocksDbEngine {
            db,
            path: path.to_path_buf(),
            settings: settings.clone(),
            write_options,
            _cache: cache,
            _write_buffer_manager: write_buffer_manager,
        })
    }

    /// The newest `OPTIONS-*` file RocksDB wrote: its complete effective configuration.
    fn options_file_text(&self) -> Option<String> {
        let mut newest: Option<(u64, PathBuf)> = None;
        for entry in std::fs::read_dir(&self.path).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(number) = name.strip_prefix("OPTIONS-").and_then(|rest| rest.parse::<u64>().ok()) {
                if newest.as_ref().is_none_or(|(best, _)| number > *best) {
                    newest = Some((number, entry.path()));
                }
            }
        }
        std::fs::read_to_string(newest?.1).ok()
    }
}

impl Engine for RocksDbEngine {
    type Session<'a> = RocksDbSession<'a>;

    fn session(&self) -> Result<RocksDbSession<'_>> {
        Ok(RocksDbSession { engine: self, batch: WriteBatch::default(), read_options: ReadOptions::default() })
    }

    fn settle(&self) -> Result<()> {
        self.db.flush().context("flushing RocksDB")?;
        let mut wait_options = WaitForCompactOptions::default();
        wait_options.set_flush(true);
        self.db.wait_for_compact(&wait_options).context("waiting for RocksDB's compactions")?;
        Ok(())
    }

    fn configuration(&self) -> String {
        let mut text = format!("rocksdb crate 0.25 (RocksDB 11.8.1)\n{}", rocksdb_settings_text(&self.settings));
        if let Some(options_file) = self.options_file_text() {
            text.push_str("\n\nEffective options (RocksDB's OPTIONS file):\n");
            text.push_str(&options_file);
        }
        text
    }

    fn statistics(&self) -> String {
        match self.db.property_value("rocksdb.stats") {
            Ok(Some(text)) => text,
            Ok(None) => "RocksDB returned no rocksdb.stats".to_string(),
            Err(error) => format!("reading rocksdb.stats failed: {error}"),
        }
    }

    fn write_stalls(&self) -> Option<WriteStalls> {
        // Both figures come from properties RocksDB keeps anyway; enabling its statistics object
        // would give the same stall time but would also change what is being measured.
        let db_stats = self.db.property_value(DB_STATS_PROPERTY).ok()??;
        let stall_micros = parse_cumulative_stall_micros(&db_stats)?;
        let stall_text = self.db.property_value(CF_WRITE_STALL_PROPERTY).ok()??;
        let counts = parse_stall_condition_counts(&stall_text)?;
        Some(WriteStalls { stall_micros, stall_count: counts.delays + counts.stops })
    }

    fn close(self) -> Result<()> {
        // RocksDB closes when the handle is dropped; it reports no error there.
        drop(self.db);
        Ok(())
    }
}

/// A thread's handle on a [`RocksDbEngine`].
pub struct RocksDbSession<'a> {
    engine: &'a RocksDbEngine,
    batch: WriteBatch,
    read_options: ReadOptions,
}

impl Session for RocksDbSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.engine.db.put_opt(key, value, &self.engine.write_options).context("RocksDB put")
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.engine.db.delete_opt(key, &self.engine.write_options).context("RocksDB delete")
    }

    fn batch_put(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
    }

    fn batch_delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
    }

    fn commit_batch(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        self.engine.db.write_opt(batch, &self.engine.write_options).context("RocksDB write")
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        let value = self.engine.db.get_pinned_opt(key, &self.read_options).context("RocksDB get")?;
        Ok(value.map(|value| value.len()))
    }

    fn scan(&mut self, start: &[u8], limit: usize) -> Result<ScanOutcome> {
        let mut iterator = self.engine.db.raw_iterator_opt(ReadOptions::default());
        iterator.seek(start);
        let mut outcome = ScanOutcome::default();
        while let (Some(key), Some(value)) = (iterator.key(), iterator.value()) {
            outcome.entries += 1;
            outcome.bytes += (key.len() + value.len()) as u64;
            if outcome.entries >= limit as u64 {
                break;
            }
            iterator.next();
        }
        iterator.status().context("RocksDB iterator")?;
        Ok(outcome)
    }
}
