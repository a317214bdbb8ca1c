//! Metric arithmetic and the process counters a run reads from `/proc`.
//!
//! Latencies are recorded in nanoseconds into HDR histograms (3 significant digits, up to 100 s)
//! and summarized in microseconds. Resource use is the difference of two [`ProcessSnapshot`]s:
//! CPU user and system time from `/proc/self/stat`, bytes read from and written to storage from
//! `/proc/self/io` (`read_bytes`, `write_bytes`: what reached, or will reach, the block layer,
//! page cache hits excluded). Peak memory is `VmHWM` from `/proc/self/status`, which can be reset
//! between phases through `/proc/self/clear_refs`.

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::error::{BenchError, Context, Result};

/// The largest latency a histogram records exactly (larger values are clamped), in nanoseconds.
pub const MAX_RECORDED_LATENCY_NANOS: u64 = 100_000_000_000;

/// A latency histogram in nanoseconds.
pub fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_RECORDED_LATENCY_NANOS, 3)
        .map_err(|error| BenchError::new(format!("creating a latency histogram: {error:?}")))
}

/// Adds `source` into `target`.
pub fn merge_histogram(target: &mut Histogram<u64>, source: &Histogram<u64>) -> Result<()> {
    target.add(source).map_err(|error| BenchError::new(format!("merging latency histograms: {error:?}")))
}

/// The latency distribution of a run, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    /// Recorded samples.
    pub count: u64,
    /// Mean.
    pub average_us: f64,
    /// Standard deviation.
    pub stddev_us: f64,
    /// Coefficient of variation (stddev / mean) in percent.
    pub cv_percent: f64,
    /// Median.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Smallest sample.
    pub min_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

impl LatencySummary {
    /// Summarizes a histogram of nanosecond samples; all zero when it is empty.
    pub fn from_histogram(histogram: &Histogram<u64>) -> LatencySummary {
        if histogram.is_empty() {
            return LatencySummary::default();
        }
        let micros = |nanos: u64| nanos as f64 / 1000.0;
        let average_us = histogram.mean() / 1000.0;
        let stddev_us = histogram.stdev() / 1000.0;
        LatencySummary {
            count: histogram.len(),
            average_us,
            stddev_us,
            cv_percent: coefficient_of_variation_percent(average_us, stddev_us),
            p50_us: micros(histogram.value_at_quantile(0.50)),
            p95_us: micros(histogram.value_at_quantile(0.95)),
            p99_us: micros(histogram.value_at_quantile(0.99)),
            p999_us: micros(histogram.value_at_quantile(0.999)),
            min_us: micros(histogram.min()),
            max_us: micros(histogram.max()),
        }
    }
}

/// Standard deviation over mean, in percent; 0 when the mean is 0.
pub fn coefficient_of_variation_percent(mean: f64, stddev: f64) -> f64 {
    if mean > 0.0 {
        stddev / mean * 100.0
    } else {
        0.0
    }
}

/// `numerator / denominator`, or `None` when the denominator is 0 (the ratio is undefined,
/// e.g. write amplification of a read-only run).
pub fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

/// The geometric mean of positive values; `None` when there are none.
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    let positive: Vec<f64> = values.iter().copied().filter(|value| *value > 0.0 && value.is_finite()).collect();
    if positive.is_empty() {
        return None;
    }
    Some((positive.iter().map(|value| value.ln()).sum::<f64>() / positive.len() as f64).exp())
}

/// Counters of this process at one instant.
#[derive(Clone, Copy, Debug)]
pub struct ProcessSnapshot {
    /// When the counters were read.
    pub at: Instant,
    /// CPU time in user mode, all threads.
    pub cpu_user_seconds: f64,
    /// CPU time in kernel mode, all threads.
    pub cpu_system_seconds: f64,
    /// Bytes fetched from storage.
    pub read_bytes: u64,
    /// Bytes sent (or dirtied, to be sent) to storage.
    pub write_bytes: u64,
    /// Dirty bytes dropped before reaching storage (files truncated or deleted in time).
    pub cancelled_write_bytes: u64,
}

/// The difference between two snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ResourceUse {
    /// Wall time between the snapshots.
    pub wall_seconds: f64,
    /// User CPU time.
    pub cpu_user_seconds: f64,
    /// System CPU time.
    pub cpu_system_seconds: f64,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes written to storage.
    pub write_bytes: u64,
    /// Written bytes that never reached storage.
    pub cancelled_write_bytes: u64,
}

impl ResourceUse {
    /// Bytes written that reached storage, or will: dirtied minus cancelled. Pages dirtied before
    /// the first snapshot and dropped after it are subtracted too, so a phase that deletes files
    /// written before it can come out slightly low (saturating at 0).
    pub fn device_write_bytes(&self) -> u64 {
        self.write_bytes.saturating_sub(self.cancelled_write_bytes)
    }

    /// CPU time (user plus system) per wall time, in percent (200 % is two busy cores).
    pub fn cpu_percent(&self) -> f64 {
        if self.wall_seconds > 0.0 {
            (self.cpu_user_seconds + self.cpu_system_seconds) / self.wall_seconds * 100.0
        } else {
            0.0
        }
    }
}

/// Clock ticks per second of `/proc/self/stat` times (`USER_HZ`, fixed at 100 on Linux).
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

impl ProcessSnapshot {
    /// Reads the counters of this process.
    pub fn now() -> Result<ProcessSnapshot> {
        let at = Instant::now();
        let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
        let (cpu_user_seconds, cpu_system_seconds) = parse_stat_cpu_seconds(&stat)?;
        let io = std::fs::read_to_string("/proc/self/io").context("reading /proc/self/io")?;
        let field = |name: &str| parse_kib_or_plain_field(&io, name, 1).unwrap_or(0);
        Ok(ProcessSnapshot {
            at,
            cpu_user_seconds,
            cpu_system_seconds,
            read_bytes: field("read_bytes:"),
            write_bytes: field("write_bytes:"),
            cancelled_write_bytes: field("cancelled_write_bytes:"),
        })
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &ProcessSnapshot) -> ResourceUse {
        ResourceUse {
            wall_seconds: self.at.duration_since(earlier.at).as_secs_f64(),
            cpu_user_seconds: self.cpu_user_seconds - earlier.cpu_user_seconds,
            cpu_system_seconds: self.cpu_system_seconds - earlier.cpu_system_seconds,
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            cancelled_write_bytes: self.cancelled_write_bytes.saturating_sub(earlier.cancelled_write_bytes),
        }
    }
}

/// User and system CPU seconds from the text of `/proc/<pid>/stat`.
pub fn parse_stat_cpu_seconds(stat: &str) -> Result<(f64, f64)> {
    // The command name (field 2) may hold spaces and parentheses; fields resume after the last ')'.
    let after_name = stat.rfind(')').map(|position| &stat[position + 1..]).unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime) of the whole line are 11 and 12 after the name.
    let parse = |index: usize| -> Result<f64> {
        let text = fields.get(index).ok_or_else(|| BenchError::new("short /proc/self/stat"))?;
        let ticks: u64 = text.parse().context("parsing /proc/self/stat")?;
        Ok(ticks as f64 / CLOCK_TICKS_PER_SECOND)
    };
    Ok((parse(11)?, parse(12)?))
}

/// The number after `name` on its line of a `/proc` file, times `unit` (e.g. 1024 for kB).
pub fn parse_kib_or_plain_field(text: &str, name: &str, unit: u64) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        rest.split_whitespace().next()?.parse::<u64>().ok().map(|value| value * unit)
    })
}

/// This process's peak resident set size (`VmHWM`) in bytes.
pub fn peak_rss_bytes() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    parse_kib_or_plain_field(&status, "VmHWM:", 1024).ok_or_else(|| BenchError::new("no VmHWM in /proc/self/status"))
}

/// Resets the peak resident set size to the current one, so the next reading covers only what
/// follows. Returns false when the kernel does not allow it.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Total size of the regular files under `path` (apparent sizes, recursively).
pub fn directory_size_bytes(path: &Path) -> Result<u64> {
    let mut total = 0;
    let entries = std::fs::read_dir(path).with_context(|| format!("listing {}", path.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", path.display()))?;
        let metadata = entry.metadata().with_context(|| format!("reading {}", entry.path().display()))?;
        if metadata.is_dir() {
            total += directory_size_bytes(&entry.path())?;
        } else if metadata.is_file() {
            total += metadata.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut histogram = new_histogram().unwrap();
        // 1..=1000 microseconds, once each.
        for micros in 1..=1000u64 {
            histogram.record(micros * 1000).unwrap();
        }
        let summary = LatencySummary::from_histogram(&histogram);
        assert_eq!(summary.count, 1000);
        let close = |value: f64, expected: f64| (value - expected).abs() <= expected * 0.002 + 0.001;
        assert!(close(summary.p50_us, 500.0), "p50 {}", summary.p50_us);
        assert!(close(summary.p95_us, 950.0), "p95 {}", summary.p95_us);
        assert!(close(summary.p99_us, 990.0), "p99 {}", summary.p99_us);
        assert!(close(summary.p999_us, 999.0), "p99.9 {}", summary.p999_us);
        assert!(close(summary.min_us, 1.0));
        assert!(close(summary.max_us, 1000.0));
        assert!(close(summary.average_us, 500.5));
        // The standard deviation of 1..=n is sqrt((n^2 - 1) / 12).
        let expected_stddev = ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt();
        assert!(close(summary.stddev_us, expected_stddev), "stddev {}", summary.stddev_us);
        assert!(close(summary.cv_percent, expected_stddev / 500.5 * 100.0));
    }

    #[test]
    fn merged_histograms_hold_every_sample() {
        let mut first = new_histogram().unwrap();
        let mut second = new_histogram().unwrap();
        for _ in 0..90 {
            first.record(1_000).unwrap();
        }
        for _ in 0..10 {
            second.record(1_000_000).unwrap();
        }
        merge_histogram(&mut first, &second).unwrap();
        let summary = LatencySummary::from_histogram(&first);
        assert_eq!(summary.count, 100);
        assert!((summary.p50_us - 1.0).abs() < 0.01);
        assert!((summary.p95_us - 1000.0).abs() < 1.0);
        // Clamped, not lost: values above the bound still count.
        first.saturating_record(u64::MAX);
        assert_eq!(first.len(), 101);
    }

    #[test]
    fn empty_histogram_summarizes_to_zero() {
        let summary = LatencySummary::from_histogram(&new_histogram().unwrap());
        assert_eq!(summary, LatencySummary::default());
    }

    #[test]
    fn amplification_and_means() {
        assert_eq!(ratio(250, 100), Some(2.5));
        assert_eq!(ratio(5, 0), None);
        assert_eq!(coefficient_of_variation_percent(0.0, 3.0), 0.0);
        assert!((coefficient_of_variation_percent(4.0, 1.0) - 25.0).abs() < 1e-9);
        let mean = geometric_mean(&[2.0, 8.0]).unwrap();
        assert!((mean - 4.0).abs() < 1e-9);
        assert!((geometric_mean(&[0.5, 2.0, f64::NAN, 0.0]).unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(geometric_mean(&[]), None);
        let usage =
            ResourceUse { wall_seconds: 2.0, cpu_user_seconds: 3.0, cpu_system_seconds: 1.0, ..Default::default() };
        assert!((usage.cpu_percent() - 200.0).abs() < 1e-9);
    }

    #[test]
    fn proc_parsing() {
        let stat = "1234 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0 9 0";
        let (user, system) = parse_stat_cpu_seconds(stat).unwrap();
        assert!((user - 2.5).abs() < 1e-9 && (system - 0.75).abs() < 1e-9);
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(parse_kib_or_plain_field(status, "VmHWM:", 1024), Some(2048 * 1024));
        let io = "rchar: 5\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_kib_or_plain_field(io, "write_bytes:", 1), Some(8192));
        assert_eq!(parse_kib_or_plain_field(io, "missing:", 1), None);
    }

    #[test]
    fn live_process_counters_are_readable() {
        let before = ProcessSnapshot::now().unwrap();
        let mut spin = 0u64;
        for value in 0..2_000_000u64 {
            spin = spin.wrapping_add(value * value);
        }
        assert!(spin > 0);
        let after = ProcessSnapshot::now().unwrap();
        let usage = after.since(&before);
        assert!(usage.wall_seconds >= 0.0 && usage.cpu_user_seconds >= 0.0);
        assert!(peak_rss_bytes().unwrap() > 0);
    }

    #[test]
    fn directory_sizes_add_up() {
        let directory = std::env::temp_dir().join(format!("riptide-bench-size-{}", std::process::id()));
        std::fs::create_dir_all(directory.join("nested")).unwrap();
        std::fs::write(directory.join("a"), vec![0u8; 1000]).unwrap();
        std::fs::write(directory.join("nested").join("b"), vec![0u8; 24]).unwrap();
        assert_eq!(directory_size_bytes(&directory).unwrap(), 1024);
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
