//! Isolation histories: list-append transactions on a real database in a temporary directory,
//! under READ COMMITTED, REPEATABLE READ and SERIALIZABLE, each in both concurrency modes, with
//! every history checked for the anomalies its level forbids (`riptide_stress::isolation`).
//! About ten thousand transactions in all, in a few seconds.
//!
//! The runs must also not be vacuous: under REPEATABLE READ and SERIALIZABLE some transactions
//! abort and the histories hold anti-dependencies; and a workload built for write skew shows
//! G2-item under REPEATABLE READ (snapshot isolation is not accidentally serializable, and the
//! checker sees cycles) and none under SERIALIZABLE. Both are forced without the clock: each
//! round's synchronized transactions are all concurrent (see `isolation::workload`), so the
//! outcome depends on the seed's plans, not on the scheduler.
//!
//! `RIPTIDE_ISOLATION_SEED` changes the seed; `make soak` runs many more through
//! `riptide-stress isolation`.

use riptide::{ConcurrencyMode, IsolationLevel};
use riptide_stress::isolation::{self, AnomalyKind, RunReport, Shape, WorkloadConfig, MODES};

/// The seeds of every configuration: two, so that the runs have four and seven threads.
fn seeds() -> [u64; 2] {
    let seed = std::env::var("RIPTIDE_ISOLATION_SEED").ok().and_then(|value| value.parse().ok()).unwrap_or(20_240_715);
    [seed, seed + 3]
}

/// Runs and checks one workload per seed; panics on a failed run or a forbidden anomaly.
fn run(isolation: IsolationLevel, mode: ConcurrencyMode, shape: Shape) -> Vec<RunReport> {
    seeds()
        .into_iter()
        .map(|seed| {
            let config = WorkloadConfig::new(seed, isolation, mode, shape);
            let report = isolation::run_and_check(&config).unwrap_or_else(|failure| panic!("{failure}"));
            println!("{}: {}", config.describe(), report.check.summary());
            if let Some(failure) = report.failure() {
                panic!("{failure}");
            }
            report
        })
        .collect()
}

#[test]
fn read_committed_shows_no_dirty_or_circular_anomaly() {
    for mode in MODES {
        for report in run(IsolationLevel::ReadCommitted, mode, Shape::Mixed) {
            let check = &report.check;
            assert!(check.committed > 0 && check.edges.rw > 0, "{}: {}", report.config.describe(), check.summary());
        }
    }
}

#[test]
fn repeatable_read_is_snapshot_isolation() {
    for mode in MODES {
        for report in run(IsolationLevel::RepeatableRead, mode, Shape::Mixed) {
            let (config, check) = (report.config.describe(), &report.check);
            assert!(check.aborted > 0, "{config}: no transaction aborted: {}", check.summary());
            assert!(check.edges.rw > 0, "{config}: no anti-dependency: {}", check.summary());
        }
    }
}

#[test]
fn serializable_histories_have_no_cycle() {
    for mode in MODES {
        for shape in [Shape::Mixed, Shape::WriteSkew] {
            for report in run(IsolationLevel::Serializable, mode, shape) {
                let (config, check) = (report.config.describe(), &report.check);
                assert!(check.aborted > 0, "{config}: no transaction aborted: {}", check.summary());
                assert!(check.edges.rw > 0, "{config}: no anti-dependency: {}", check.summary());
            }
        }
    }
}

#[test]
fn repeatable_read_allows_write_skew_and_the_checker_sees_it() {
    for mode in MODES {
        for report in run(IsolationLevel::RepeatableRead, mode, Shape::WriteSkew) {
            let (config, check) = (report.config.describe(), &report.check);
            assert!(
                check.found(AnomalyKind::G2Item),
                "{config}: no write skew under snapshot isolation: {}",
                check.summary()
            );
            let example = check.examples.iter().find(|anomaly| anomaly.kind == AnomalyKind::G2Item);
            assert!(example.is_some_and(|anomaly| anomaly.description.contains("-rw(")), "{:?}", check.examples);
        }
    }
}
