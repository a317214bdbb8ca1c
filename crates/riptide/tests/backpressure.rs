//! Back-pressure: many writers against slow flushes and compactions. Writers must be slowed
//! down and stopped as level 0 fills up, never deadlock, keep level 0 within its stop trigger
//! (plus the memtables already on their way to it), and lose no acknowledged write.

mod common;
mod slow_fs;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::fs::MemFileSystem;
use riptide::{Db, Options, ReadOptions, WriteBatch};

use common::{dump, key, value};
use slow_fs::SlowTableFileSystem;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Fails the whole test binary if `done` is not signalled within `limit`: a deadlocked writer
/// would otherwise hang the test forever instead of failing it.
fn watchdog(limit: Duration) -> mpsc::Sender<()> {
    let (done, finished) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(limit) {
            eprintln!("watchdog: the test made no end within {limit:?}; writers are deadlocked or starved");
            std::process::exit(101);
        }
    });
    done
}

/// Eight writers against flushes and compactions slowed to 300 µs per table append, with tiny
/// memtables, a level-0 slowdown trigger of 2 and a stop trigger of 4. A sampler watches level
/// 0 the whole time.
///
/// The bound on level 0: writers stop switching memtables once level 0 holds `stop` files, but
/// up to `max_immutable_memtables` memtables switched while it held `stop - 1` may still be on
/// their way (each becomes one level-0 file when its flush finishes), so level 0 never holds
/// more than `stop - 1 + max_immutable_memtables` files.
#[test]
fn eight_writers_against_slow_background_work_progress_and_lose_nothing() {
    const WRITERS: u64 = 8;
    const WRITES_PER_WRITER: u64 = 500;
    let done = watchdog(Duration::from_secs(60));
    let memory = MemFileSystem::new();
    let slow = SlowTableFileSystem::new(Arc::new(memory.clone()));
    slow.set_append_delay(Duration::from_micros(300));
    let options = Options {
        file_system: Arc::new(slow.clone()),
        memtable_size_bytes: 16 << 10,
        max_immutable_memtables: 2,
        block_size_bytes: 512,
        target_file_size_bytes: 16 << 10,
        level0_compaction_trigger_files: 2,
        level0_slowdown_writes_files: 2,
        level0_stop_writes_files: 4,
        max_open_tables: 64,
        ..Options::default()
    };
    let level0_bound = options.level0_stop_writes_files - 1 + options.max_immutable_memtables;
    let db = Db::open("/backpressure", options.clone()).expect("open");
    let writing = AtomicBool::new(true);
    let max_level0 = AtomicUsize::new(0);
    let samples = AtomicUsize::new(0);

    let models: Vec<Model> = std::thread::scope(|scope| {
        scope.spawn(|| {
            while writing.load(Ordering::Acquire) {
                max_level0.fetch_max(db.level_file_counts()[0], Ordering::Relaxed);
                samples.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let db = &db;
                scope.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(writer);
                    let mut model = Model::new();
                    // Writer `w` owns the keys `n % WRITERS == w`, so its model is exact.
                    let own_key = |rng: &mut SmallRng| rng.gen_range(0..300) * WRITERS + writer;
                    for step in 0..WRITES_PER_WRITER {
                        if rng.gen_bool(0.2) {
                            let mut batch = WriteBatch::new();
                            for _ in 0..rng.gen_range(2..6) {
                                let n = own_key(&mut rng);
                                let v = value(n, step, 100);
                                batch.put(&key(n), &v);
                                model.insert(key(n), v);
                            }
                            db.write(batch).expect("write");
                        } else if rng.gen_bool(0.1) {
                            let n = own_key(&mut rng);
                            db.delete(&key(n)).expect("delete");
                            model.remove(&key(n));
                        } else {
                            let n = own_key(&mut rng);
                            let v = value(n, step, rng.gen_range(50..200));
                            db.put(&key(n), &v).expect("put");
                            model.insert(key(n), v);
                        }
                    }
                    model
                })
            })
            .collect();
        let models = writers.into_iter().map(|writer| writer.join().expect("writer")).collect();
        writing.store(false, Ordering::Release);
        models
    });

    let stats = db.stats();
    let max_level0 = max_level0.load(Ordering::Relaxed);
    assert!(samples.load(Ordering::Relaxed) > 100, "the sampler barely ran");
    assert!(
        max_level0 <= level0_bound,
        "level 0 reached {max_level0} files, over the bound of {level0_bound}:\n{stats}"
    );
    assert!(max_level0 >= options.level0_slowdown_writes_files, "level 0 never filled up; no back-pressure:\n{stats}");
    assert!(stats.write_slowdown_count > 0 && stats.write_slowdown_micros > 0, "no slowdown counted:\n{stats}");
    assert!(stats.write_stall_count > 0 && stats.write_stall_micros > 0, "no stall counted:\n{stats}");

    let mut expected = Model::new();
    for model in models {
        expected.extend(model);
    }
    for (k, v) in &expected {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{:?}", String::from_utf8_lossy(k));
    }
    assert_eq!(dump(&db, &ReadOptions::default()), expected, "after the writers finished");
    slow.set_append_delay(Duration::ZERO);
    db.close().expect("close");
    let db = Db::open("/backpressure", options).expect("reopen");
    assert_eq!(dump(&db, &ReadOptions::default()), expected, "after reopen");
    done.send(()).expect("watchdog");
}
