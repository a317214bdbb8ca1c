//! The `compare` command: per-test ratios between two result files, so regressions show.
//!
//! Rows are matched by test name and engine. For each pair it prints the new ops/s over the old
//! (above 1: faster now), the new p99 latency over the old (below 1: better now), and the ratios
//! of write amplification and peak RSS, then the geometric mean of the throughput ratios per
//! engine. Throughput changes beyond the threshold are flagged as `REGRESSION` or `improved`.

use std::fmt::Write as _;
use std::path::Path;

use crate::csv::{read_rows, Row};
use crate::error::Result;
use crate::metrics::geometric_mean;
use crate::report::{find_row, test_names};
use crate::workload::group_thousands;

/// One matched (test, engine) pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Test name.
    pub test: String,
    /// Engine name.
    pub engine: String,
    /// Old ops/s.
    pub before_ops_per_second: f64,
    /// New ops/s.
    pub after_ops_per_second: f64,
    /// New over old ops/s.
    pub throughput_ratio: f64,
    /// New over old p99 latency.
    pub p99_ratio: Option<f64>,
    /// New over old write amplification.
    pub write_amplification_ratio: Option<f64>,
    /// New over old peak RSS.
    pub rss_ratio: Option<f64>,
}

fn ratio_of(after: &Row, before: &Row, field: &str) -> Option<f64> {
    let new = after.number(field)?;
    let old = before.number(field)?;
    (old > 0.0).then(|| new / old)
}

/// Matches the rows of `after` with those of `before`.
pub fn compare_rows(before: &[Row], after: &[Row]) -> Vec<Comparison> {
    let mut comparisons = Vec::new();
    for test in test_names(after) {
        for engine in ["riptide", "rocksdb", "tidesdb"] {
            let (Some(old), Some(new)) = (find_row(before, &test, engine), find_row(after, &test, engine)) else {
                continue;
            };
            let (Some(old_rate), Some(new_rate)) = (old.number("ops_per_second"), new.number("ops_per_second")) else {
                continue;
            };
            if old_rate <= 0.0 {
                continue;
            }
            comparisons.push(Comparison {
                test: test.clone(),
                engine: engine.to_string(),
                before_ops_per_second: old_rate,
                after_ops_per_second: new_rate,
                throughput_ratio: new_rate / old_rate,
                p99_ratio: ratio_of(new, old, "latency_p99_us"),
                write_amplification_ratio: ratio_of(new, old, "write_amplification"),
                rss_ratio: ratio_of(new, old, "peak_rss_bytes"),
            });
        }
    }
    comparisons
}

fn times(value: Option<f64>) -> String {
    value.map(|value| format!("{value:.2}x")).unwrap_or_else(|| "-".to_string())
}

/// The comparison as a Markdown table with a verdict per row; `threshold` is the relative
/// throughput change that counts (0.05: 5 %).
pub fn format_comparison(comparisons: &[Comparison], threshold: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Test | Engine | Before ops/s | After ops/s | Throughput | p99 | Write amp | Peak RSS | Verdict |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---|");
    for comparison in comparisons {
        let verdict = if comparison.throughput_ratio < 1.0 - threshold {
            "REGRESSION"
        } else if comparison.throughput_ratio > 1.0 + threshold {
            "improved"
        } else {
            "same"
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {verdict} |",
            comparison.test,
            comparison.engine,
            group_thousands(comparison.before_ops_per_second.round() as u64),
            group_thousands(comparison.after_ops_per_second.round() as u64),
            times(Some(comparison.throughput_ratio)),
            times(comparison.p99_ratio),
            times(comparison.write_amplification_ratio),
            times(comparison.rss_ratio),
        );
    }
    let _ = writeln!(out);
    for engine in ["riptide", "rocksdb", "tidesdb"] {
        let ratios: Vec<f64> = comparisons
            .iter()
            .filter(|comparison| comparison.engine == engine)
            .map(|comparison| comparison.throughput_ratio)
            .collect();
        if let Some(mean) = geometric_mean(&ratios) {
            let _ = writeln!(out, "{engine}: geometric mean throughput ratio {mean:.3}x over {} tests", ratios.len());
        }
    }
    let regressions = comparisons.iter().filter(|comparison| comparison.throughput_ratio < 1.0 - threshold).count();
    let _ = writeln!(out, "{regressions} regression(s) beyond {:.0} %.", threshold * 100.0);
    out
}

/// Reads two result files and compares them; returns the text and the number of regressions.
pub fn compare_files(before: &Path, after: &Path, threshold: f64) -> Result<(String, usize)> {
    let comparisons = compare_rows(&read_rows(before)?, &read_rows(after)?);
    let regressions = comparisons.iter().filter(|comparison| comparison.throughput_ratio < 1.0 - threshold).count();
    let mut text = format!("Before: {}\nAfter:  {}\n\n", before.display(), after.display());
    if comparisons.is_empty() {
        text.push_str("No (test, engine) pair appears in both files.\n");
    } else {
        text.push_str(&format_comparison(&comparisons, threshold));
    }
    Ok((text, regressions))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(test: &str, engine: &str, ops_per_second: f64, p99: f64) -> Row {
        let mut row = Row::new();
        row.push("test", test);
        row.push("engine", engine);
        row.push("ops_per_second", ops_per_second.to_string());
        row.push("latency_p99_us", p99.to_string());
        row
    }

    #[test]
    fn ratios_and_verdicts() {
        let before =
            vec![row("a", "riptide", 100.0, 10.0), row("b", "riptide", 100.0, 10.0), row("c", "rocksdb", 1.0, 1.0)];
        let after =
            vec![row("a", "riptide", 80.0, 20.0), row("b", "riptide", 103.0, 10.0), row("d", "riptide", 5.0, 1.0)];
        let comparisons = compare_rows(&before, &after);
        assert_eq!(comparisons.len(), 2);
        assert!((comparisons[0].throughput_ratio - 0.8).abs() < 1e-9);
        assert_eq!(comparisons[0].p99_ratio, Some(2.0));
        let text = format_comparison(&comparisons, 0.05);
        assert!(text.contains("| a | riptide | 100 | 80 | 0.80x | 2.00x | - | - | REGRESSION |"), "{text}");
        assert!(text.contains("| b | riptide | 100 | 103 | 1.03x | 1.00x | - | - | same |"), "{text}");
        assert!(text.contains("1 regression(s) beyond 5 %."));
    }
}
