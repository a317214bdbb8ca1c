//! Throughput over time: each run's one-second samples (`timeseries.csv`) and their summary.
//!
//! A long write run starts at memtable speed and settles at what flushes and compactions can
//! sustain; its mean ops/s hides both, and hides the seconds in which writes stalled. The
//! summary therefore compares the first and the last tenth of the phase and counts the seconds
//! that fell far below the run's median second, which is where stalls show.

use std::path::Path;

use crate::bail;
use crate::csv::read_rows;
use crate::error::{Context, Result};
use crate::workload::Sample;

/// One run's samples, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// The test name.
    pub test: String,
    /// The engine's name.
    pub engine: String,
    /// Operations per interval of the measured phase.
    pub samples: Vec<Sample>,
}

/// Reads `timeseries.csv`: one timeline per (test, engine), in order of first appearance.
///
/// A run that was repeated into the same file starts again at its first second; the repeat
/// replaces the earlier samples, as the report's tables take the last row of a test.
pub fn read_timelines(path: &Path) -> Result<Vec<Timeline>> {
    let rows = read_rows(path)?;
    let mut timelines: Vec<Timeline> = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let field = |name: &str| row.number(name);
        let (Some(elapsed_seconds), Some(interval_seconds), Some(operations)) =
            (field("elapsed_seconds"), field("interval_seconds"), field("operations"))
        else {
            bail!("{}: row {} lacks a number of its sample", path.display(), index + 2);
        };
        if operations < 0.0 || interval_seconds < 0.0 {
            bail!("{}: row {} has a negative count or interval", path.display(), index + 2);
        }
        let sample = Sample { elapsed_seconds, interval_seconds, operations: operations as u64 };
        let (test, engine) = (row.text("test"), row.text("engine"));
        match timelines.iter_mut().find(|timeline| timeline.test == test && timeline.engine == engine) {
            Some(timeline) => {
                let restarted =
                    timeline.samples.last().is_some_and(|last| sample.elapsed_seconds <= last.elapsed_seconds);
                if restarted {
                    timeline.samples.clear();
                }
                timeline.samples.push(sample);
            }
            None => {
                timelines.push(Timeline { test: test.to_string(), engine: engine.to_string(), samples: vec![sample] })
            }
        }
    }
    Ok(timelines)
}

/// Reads `timeseries.csv` when it exists (a results directory of an older build may lack it).
pub fn read_timelines_if_present(path: &Path) -> Result<Vec<Timeline>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    read_timelines(path).with_context(|| format!("reading the samples of {}", path.display()))
}

/// What a run's samples say about its throughput over time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelineSummary {
    /// Length of the measured phase.
    pub phase_seconds: f64,
    /// Operations per second over the whole phase.
    pub mean_ops_per_second: f64,
    /// Operations per second over the first tenth of the phase.
    pub first_tenth_ops_per_second: f64,
    /// Operations per second over the last tenth of the phase.
    pub last_tenth_ops_per_second: f64,
    /// The median of the whole seconds' rates.
    pub median_second_ops_per_second: f64,
    /// The slowest whole second's rate.
    pub slowest_second_ops_per_second: f64,
    /// Whole seconds whose rate was below half the median.
    pub slow_seconds: usize,
    /// Whole seconds in which no operation completed.
    pub idle_seconds: usize,
}

/// Samples whose interval is shorter than this are the phase's ragged end, not a whole second.
const WHOLE_SECOND_MINIMUM_SECONDS: f64 = 0.5;

/// Operations per second over `samples` (which are contiguous intervals).
fn window_rate(samples: &[&Sample]) -> f64 {
    let seconds: f64 = samples.iter().map(|sample| sample.interval_seconds).sum();
    let operations: u64 = samples.iter().map(|sample| sample.operations).sum();
    if seconds > 0.0 {
        operations as f64 / seconds
    } else {
        0.0
    }
}

/// The median of `values`, which must be sorted and not empty.
fn median_of_sorted(values: &[f64]) -> f64 {
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// Summarizes samples in time order; `None` when there is nothing to summarize.
pub fn summarize(samples: &[Sample]) -> Option<TimelineSummary> {
    let first = samples.first()?;
    let last = samples.last()?;
    let phase_seconds = last.elapsed_seconds;
    if phase_seconds <= 0.0 {
        return None;
    }
    let tenth = phase_seconds / 10.0;
    // A little slack keeps a sample that ends exactly on the boundary, despite rounding.
    let slack = 1e-9;
    let mut head: Vec<&Sample> = samples.iter().filter(|sample| sample.elapsed_seconds <= tenth + slack).collect();
    if head.is_empty() {
        head.push(first);
    }
    let mut tail: Vec<&Sample> = samples
        .iter()
        .filter(|sample| sample.elapsed_seconds - sample.interval_seconds >= phase_seconds - tenth - slack)
        .collect();
    if tail.is_empty() {
        tail.push(last);
    }
    let whole: Vec<&Sample> =
        samples.iter().filter(|sample| sample.interval_seconds >= WHOLE_SECOND_MINIMUM_SECONDS).collect();
    // A phase shorter than a second has no whole second; its only sample stands in for one.
    let seconds: Vec<&Sample> = if whole.is_empty() { samples.iter().collect() } else { whole };
    let mut rates: Vec<f64> = seconds.iter().map(|sample| window_rate(&[*sample])).collect();
    rates.sort_by(f64::total_cmp);
    let median = median_of_sorted(&rates);
    let total_operations: u64 = samples.iter().map(|sample| sample.operations).sum();
    Some(TimelineSummary {
        phase_seconds,
        mean_ops_per_second: total_operations as f64 / phase_seconds,
        first_tenth_ops_per_second: window_rate(&head),
        last_tenth_ops_per_second: window_rate(&tail),
        median_second_ops_per_second: median,
        slowest_second_ops_per_second: rates[0],
        slow_seconds: rates.iter().filter(|rate| **rate < median / 2.0).count(),
        idle_seconds: seconds.iter().filter(|sample| sample.operations == 0).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sample per second with the given operation counts, then a ragged end.
    fn seconds(counts: &[u64], tail: Option<(f64, u64)>) -> Vec<Sample> {
        let mut samples: Vec<Sample> = counts
            .iter()
            .enumerate()
            .map(|(index, &operations)| Sample {
                elapsed_seconds: (index + 1) as f64,
                interval_seconds: 1.0,
                operations,
            })
            .collect();
        if let Some((interval_seconds, operations)) = tail {
            let elapsed_seconds = counts.len() as f64 + interval_seconds;
            samples.push(Sample { elapsed_seconds, interval_seconds, operations });
        }
        samples
    }

    #[test]
    fn a_run_that_slows_down_and_stalls() {
        // Twenty seconds: two fast ones, then a steady rate with two stalled seconds.
        let mut counts = vec![1000, 1000];
        counts.extend([400; 16]);
        counts[9] = 0;
        counts[12] = 100;
        counts.extend([300, 300]);
        let summary = summarize(&seconds(&counts, None)).unwrap();
        assert_eq!(summary.phase_seconds, 20.0);
        let total: u64 = counts.iter().sum();
        assert!((summary.mean_ops_per_second - total as f64 / 20.0).abs() < 1e-9);
        assert_eq!(summary.first_tenth_ops_per_second, 1000.0);
        assert_eq!(summary.last_tenth_ops_per_second, 300.0);
        assert_eq!(summary.median_second_ops_per_second, 400.0);
        assert_eq!(summary.slowest_second_ops_per_second, 0.0);
        assert_eq!(summary.slow_seconds, 2, "the idle second and the 100-op second");
        assert_eq!(summary.idle_seconds, 1);
    }

    #[test]
    fn the_ragged_end_counts_in_rates_but_not_as_a_second() {
        // Ten whole seconds, then 0.1 s with 10 operations (100 ops/s, not a slow second).
        let samples = seconds(&[500; 10], Some((0.1, 10)));
        let summary = summarize(&samples).unwrap();
        assert!((summary.phase_seconds - 10.1).abs() < 1e-9);
        assert_eq!(summary.slow_seconds, 0);
        assert_eq!(summary.slowest_second_ops_per_second, 500.0);
        // The last tenth (1.01 s) starts inside the tenth second, so only the ragged end is in it.
        assert!((summary.last_tenth_ops_per_second - 100.0).abs() < 1e-9);
        assert!((summary.mean_ops_per_second - 5010.0 / 10.1).abs() < 1e-9);
    }

    #[test]
    fn short_and_empty_runs() {
        assert_eq!(summarize(&[]), None);
        let blink = [Sample { elapsed_seconds: 0.25, interval_seconds: 0.25, operations: 50 }];
        let summary = summarize(&blink).unwrap();
        assert_eq!(summary.first_tenth_ops_per_second, 200.0);
        assert_eq!(summary.last_tenth_ops_per_second, 200.0);
        assert_eq!(summary.median_second_ops_per_second, 200.0);
        // An even number of seconds takes the mean of the middle two.
        assert_eq!(summarize(&seconds(&[100, 300], None)).unwrap().median_second_ops_per_second, 200.0);
        // Exactly half the median is not yet slow.
        assert_eq!(summarize(&seconds(&[100, 100, 100, 50, 49], None)).unwrap().slow_seconds, 1);
    }

    #[test]
    fn timelines_read_back_grouped_and_reruns_replace() {
        let path = std::env::temp_dir().join(format!("riptide-bench-timeline-{}.csv", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let first_run = seconds(&[10, 20], Some((0.5, 5)));
        crate::workload::append_timeseries(&path, "write, long", "riptide", &first_run).unwrap();
        crate::workload::append_timeseries(&path, "write, long", "rocksdb", &seconds(&[7], None)).unwrap();
        let rerun = seconds(&[30, 40, 50], None);
        crate::workload::append_timeseries(&path, "write, long", "riptide", &rerun).unwrap();
        let timelines = read_timelines(&path).unwrap();
        assert_eq!(timelines.len(), 2);
        assert_eq!((timelines[0].test.as_str(), timelines[0].engine.as_str()), ("write, long", "riptide"));
        assert_eq!(timelines[0].samples, rerun, "the rerun replaced the first run");
        assert_eq!(timelines[1].engine, "rocksdb");
        assert_eq!(timelines[1].samples.len(), 1);
        std::fs::write(&path, "test,engine,elapsed_seconds,interval_seconds,operations\na,b,1,1,\n").unwrap();
        assert!(read_timelines(&path).is_err(), "a sample without its count is an error");
        std::fs::remove_file(&path).unwrap();
        assert!(read_timelines_if_present(&path).unwrap().is_empty());
    }
}
