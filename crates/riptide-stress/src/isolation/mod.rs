//! The isolation history checker: threads run list-append transactions against a real
//! database under one isolation level and concurrency mode ([`workload`]), every operation and
//! what it saw is recorded ([`history`]), and the history is checked ([`checker`]) for the
//! anomalies of Adya's taxonomy, Elle-style: reads must show committed versions (G1a, G1b,
//! incompatible reads, read-your-writes), and the dependency graph among committed
//! transactions ([`graph`]) must have no cycle the level forbids (G0, G1c, G-single, G2-item).
//!
//! What each level forbids ([`AnomalyKind::forbidden_at`]): READ COMMITTED (and READ
//! UNCOMMITTED, which Riptide runs as READ COMMITTED) forbids G0, G1a, G1b and G1c; REPEATABLE
//! READ, which is snapshot isolation, also G-single (so lost updates and read skew) and reads
//! off the snapshot, and allows G2-item (write skew); SERIALIZABLE forbids every cycle, and
//! anti-dependencies against commit order.
//!
//! [`run_and_check`] runs one workload in a temporary directory and checks it; [`soak`] runs
//! seeds one after another for a while under each level and mode, for `make soak` (the
//! `riptide-stress isolation` command).
//!
//! Concurrency contract: a run's threads share one database (see `workload`); checking is
//! single-threaded; runs are independent, each with its own directory.
//!
//! Invariants: a seed fixes every transaction's plan, not the interleaving, so a seed replays
//! a workload but an anomaly may need several runs to show again; every failure message names
//! the seed, the level, the mode and the shape.

pub mod checker;
pub mod graph;
pub mod history;
pub mod workload;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use riptide::{ConcurrencyMode, IsolationLevel};

pub use checker::{check, Anomaly, AnomalyKind, CheckReport};
pub use history::History;
pub use workload::{Shape, WorkloadConfig};

/// The isolation levels the checker runs (READ UNCOMMITTED is READ COMMITTED in Riptide).
pub const LEVELS: [IsolationLevel; 3] =
    [IsolationLevel::ReadCommitted, IsolationLevel::RepeatableRead, IsolationLevel::Serializable];

/// Both concurrency modes.
pub const MODES: [ConcurrencyMode; 2] = [ConcurrencyMode::Pessimistic, ConcurrencyMode::Optimistic];

/// One checked run.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// What ran.
    pub config: WorkloadConfig,
    /// What the checker found.
    pub check: CheckReport,
    /// The recorded history, for a closer look at a failure.
    pub history: History,
}

impl RunReport {
    /// The anomalies the run's level forbids, described with the run's parameters; `None` when
    /// there are none.
    pub fn failure(&self) -> Option<String> {
        let level = self.config.isolation;
        if self.check.forbidden_count(level) == 0 {
            return None;
        }
        Some(format!(
            "{}: {} forbidden anomalies ({})\n{}",
            self.config.describe(),
            self.check.forbidden_count(level),
            self.check.summary(),
            self.check.describe_forbidden(level)
        ))
    }
}

/// Runs `config` against a new database in a temporary directory and checks the history.
/// `Err` is a failure of the run itself (an engine error that is not retryable, or an answer
/// that breaks the API's contract), with the seed.
pub fn run_and_check(config: &WorkloadConfig) -> Result<RunReport, String> {
    let directory =
        tempfile::tempdir().map_err(|error| format!("{}: temporary directory: {error}", config.describe()))?;
    let history = workload::run(config, &directory.path().join("db"))?;
    let check = checker::check(&history);
    Ok(RunReport { config: config.clone(), check, history })
}

/// What a soak did under one level and mode.
#[derive(Clone, Debug)]
pub struct ConfigurationCounts {
    /// The level.
    pub isolation: IsolationLevel,
    /// The mode.
    pub mode: ConcurrencyMode,
    /// Runs (seeds) completed.
    pub runs: u64,
    /// Transactions recorded.
    pub transactions: u64,
    /// Those that committed.
    pub committed: u64,
    /// Those the engine refused.
    pub aborted: u64,
    /// Anti-dependency edges seen (a measure of contention).
    pub anti_dependencies: u64,
    /// Anomalies the level forbids.
    pub forbidden_anomalies: u64,
    /// Every anomaly found, by kind (allowed ones included, such as write skew under
    /// REPEATABLE READ).
    pub anomalies: BTreeMap<AnomalyKind, u64>,
}

impl ConfigurationCounts {
    /// The counts for messages.
    pub fn summary(&self) -> String {
        let anomalies: Vec<String> =
            self.anomalies.iter().map(|(kind, count)| format!("{} {count}", kind.name())).collect();
        format!(
            "{:?}/{:?}: {} runs, {} transactions, {} committed, {} aborted, {} rw edges, {} forbidden anomalies \
             (all anomalies: {})",
            self.isolation,
            self.mode,
            self.runs,
            self.transactions,
            self.committed,
            self.aborted,
            self.anti_dependencies,
            self.forbidden_anomalies,
            if anomalies.is_empty() { "none".to_string() } else { anomalies.join(", ") }
        )
    }
}

/// What a soak did.
#[derive(Clone, Debug, Default)]
pub struct SoakReport {
    /// Seeds covered, `first..last`.
    pub seeds: String,
    /// Counts per level and mode, in the order of [`LEVELS`] and [`MODES`].
    pub configurations: Vec<ConfigurationCounts>,
    /// Failures: runs that failed, or found anomalies their level forbids.
    pub failures: Vec<String>,
}

impl SoakReport {
    /// Transactions recorded in every configuration.
    pub fn transactions(&self) -> u64 {
        self.configurations.iter().map(|counts| counts.transactions).sum()
    }
}

/// The soak's run number `run` of `seed`: [`WorkloadConfig::new`], with every fourth run
/// [`Shape::WriteSkew`] and the lock settings taking turns: the defaults, no waiting at all
/// (`Some(Duration::ZERO)`), and short timeouts without deadlock detection (deadlocks then end
/// by timeouts).
pub fn soak_config(seed: u64, run: u64, isolation: IsolationLevel, mode: ConcurrencyMode) -> WorkloadConfig {
    let shape = if run % 4 == 3 { Shape::WriteSkew } else { Shape::Mixed };
    let mut config = WorkloadConfig::new(seed, isolation, mode, shape);
    match run % 3 {
        1 => config.lock_timeout = Some(Duration::ZERO),
        2 => {
            config.lock_timeout = Some(Duration::from_millis(20));
            config.deadlock_detection = false;
        }
        _ => {}
    }
    config
}

/// Runs seeds from `first_seed` on under every level of [`LEVELS`] and mode of [`MODES`], for
/// `duration_per_configuration` each (at least one run each), each run as [`soak_config`]
/// makes it. A configuration stops at its first failure; the others still run.
pub fn soak(first_seed: u64, duration_per_configuration: Duration) -> SoakReport {
    let mut report = SoakReport::default();
    let mut last_seed = first_seed;
    for isolation in LEVELS {
        for mode in MODES {
            let started = Instant::now();
            let mut counts = ConfigurationCounts {
                isolation,
                mode,
                runs: 0,
                transactions: 0,
                committed: 0,
                aborted: 0,
                anti_dependencies: 0,
                forbidden_anomalies: 0,
                anomalies: BTreeMap::new(),
            };
            let mut seed = first_seed;
            loop {
                let config = soak_config(seed, seed - first_seed, isolation, mode);
                last_seed = last_seed.max(seed);
                match run_and_check(&config) {
                    Err(failure) => {
                        report.failures.push(failure);
                        break;
                    }
                    Ok(run) => {
                        counts.runs += 1;
                        counts.transactions += run.check.transactions as u64;
                        counts.committed += run.check.committed as u64;
                        counts.aborted += run.check.aborted as u64;
                        counts.anti_dependencies += run.check.edges.rw as u64;
                        counts.forbidden_anomalies += run.check.forbidden_count(isolation) as u64;
                        for (kind, count) in &run.check.counts {
                            *counts.anomalies.entry(*kind).or_insert(0) += *count as u64;
                        }
                        if let Some(failure) = run.failure() {
                            report.failures.push(failure);
                            break;
                        }
                    }
                }
                if started.elapsed() >= duration_per_configuration {
                    break;
                }
                seed += 1;
            }
            report.configurations.push(counts);
        }
    }
    report.seeds = format!("{first_seed}..{last_seed}");
    report
}
