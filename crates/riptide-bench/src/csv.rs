//! Result rows and their CSV files: one row per run, one column per parameter and metric.
//!
//! A [`Row`] is an ordered list of named text fields, so that files written by an older build
//! (with fewer columns) can still be read by the report and the `compare` command. Fields are
//! quoted only when they hold a comma, a quote or a line break (RFC 4180); undefined metrics
//! (write amplification of a read-only run, say) are empty.
//!
//! Transaction runs fill the `transaction_*` columns (mode, key space, attempts, commits, aborts
//! by kind and the abort rate, a fraction); every other run leaves them empty, and files from
//! builds before them read back with those fields absent, which readers treat alike. In those
//! runs `operations_done`, `ops_per_second` and the `latency_*` columns (unit `txn`) are those of
//! committed transactions.
//!
//! The last columns say which iterator form a seek or scan run used (`scan_iterator`: fresh or
//! reseek, empty for other workloads) and how many of the run's answers were checked and wrong
//! (`answers_checked`, `wrong_answers`; see `crate::verify`).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use crate::bail;
use crate::error::{Context, Result};
use crate::metrics::LatencySummary;
use crate::transaction::TransactionCounts;
use crate::workload::{RunResult, Workload};

/// One run's fields, in column order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    fields: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

fn number(value: f64) -> String {
    if value.is_finite() {
        let text = format!("{value:.6}");
        let trimmed = text.trim_end_matches('0').trim_end_matches('.');
        if trimmed.is_empty() || trimmed == "-" {
            "0".to_string()
        } else {
            trimmed.to_string()
        }
    } else {
        String::new()
    }
}

fn optional(value: Option<f64>) -> String {
    value.map(number).unwrap_or_default()
}

impl Row {
    /// An empty row.
    pub fn new() -> Row {
        Row::default()
    }

    /// Appends (or replaces) a field.
    pub fn push(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        match self.index.get(name) {
            Some(&position) => self.fields[position].1 = value,
            None => {
                self.index.insert(name.to_string(), self.fields.len());
                self.fields.push((name.to_string(), value));
            }
        }
    }

    /// The text of a field, if the row has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.index.get(name).map(|&position| self.fields[position].1.as_str())
    }

    /// The text of a field, empty when absent.
    pub fn text(&self, name: &str) -> &str {
        self.get(name).unwrap_or("")
    }

    /// A numeric field; `None` when absent, empty or not a number.
    pub fn number(&self, name: &str) -> Option<f64> {
        self.get(name).and_then(|text| text.trim().parse::<f64>().ok()).filter(|value| value.is_finite())
    }

    /// The column names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(name, _)| name.as_str())
    }

    /// The values, in column order.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(_, value)| value.as_str())
    }

    /// The row of a run's result.
    pub fn from_result(result: &RunResult) -> Row {
        let parameters = &result.parameters;
        let mut row = Row::new();
        row.push("test", result.test.clone());
        row.push("engine", result.engine.clone());
        row.push("workload", parameters.workload.as_str());
        row.push("pattern", parameters.pattern.as_str());
        row.push("operations", parameters.operations.to_string());
        row.push("threads", parameters.threads.to_string());
        row.push("batch_size", parameters.batch_size.to_string());
        row.push("key_size_bytes", parameters.key_size_bytes.to_string());
        row.push("value_size_bytes", parameters.value_size_bytes.to_string());
        row.push("range_size", parameters.range_size.to_string());
        row.push("sync", parameters.sync.to_string());
        row.push("memtable_size_bytes", parameters.memtable_size_bytes.to_string());
        row.push("block_cache_size_bytes", parameters.block_cache_size_bytes.to_string());
        row.push("max_memory_bytes", parameters.max_memory_bytes.to_string());
        row.push("bloom", (!parameters.no_bloom).to_string());
        row.push("value_compressibility", number(parameters.value_compressibility));
        row.push("max_seconds", number(parameters.max_seconds));
        row.push("operations_done", result.operations_done.to_string());
        row.push("capped", result.capped.to_string());
        row.push("duration_seconds", number(result.duration_seconds));
        row.push("ops_per_second", number(result.ops_per_second));
        row.push("put_ops_per_second", optional(result.put_ops_per_second));
        row.push("get_ops_per_second", optional(result.get_ops_per_second));
        row.push("latency_unit", result.latency_unit.clone());
        push_latency(&mut row, "latency", Some(&result.latency));
        push_latency(&mut row, "get_latency", result.get_latency.as_ref());
        row.push("found", result.found.to_string());
        row.push("populate_seconds", number(result.populate_seconds));
        row.push("settle_seconds", number(result.settle_seconds));
        row.push("resource_wall_seconds", number(result.resources.wall_seconds));
        row.push("cpu_user_seconds", number(result.resources.cpu_user_seconds));
        row.push("cpu_system_seconds", number(result.resources.cpu_system_seconds));
        row.push("cpu_percent", number(result.resources.cpu_percent()));
        row.push("peak_rss_bytes", result.peak_rss_bytes.to_string());
        row.push("peak_rss_reset", result.peak_rss_reset.to_string());
        row.push("disk_read_bytes", result.resources.read_bytes.to_string());
        row.push("disk_write_bytes", result.resources.write_bytes.to_string());
        row.push("disk_cancelled_write_bytes", result.resources.cancelled_write_bytes.to_string());
        row.push("logical_write_bytes", result.logical_write_bytes.to_string());
        row.push("logical_read_bytes", result.logical_read_bytes.to_string());
        row.push("write_amplification", optional(result.write_amplification()));
        row.push("write_amplification_dirtied", optional(result.write_amplification_dirtied()));
        row.push("read_amplification", optional(result.read_amplification()));
        row.push("db_size_bytes", result.db_size_bytes.to_string());
        row.push("live_keys", result.live_keys.to_string());
        row.push("live_logical_bytes", result.live_logical_bytes.to_string());
        row.push("space_amplification", optional(result.space_amplification()));
        row.push("write_stall_seconds", optional(result.write_stalls.map(|stalls| stalls.stall_seconds())));
        row.push(
            "write_stall_count",
            result.write_stalls.map(|stalls| stalls.stall_count.to_string()).unwrap_or_default(),
        );
        push_transactions(&mut row, result);
        // Seeks and scans name their iterator form; every run says how many answers were checked.
        let scans = matches!(parameters.workload, Workload::Seek | Workload::Range);
        row.push("scan_iterator", if scans { parameters.scan_iterator.as_str() } else { "" });
        row.push("answers_checked", result.answers_checked.to_string());
        row.push("wrong_answers", result.wrong_answers.to_string());
        row
    }
}

/// The transaction columns: filled for transaction runs, empty for the others.
fn push_transactions(row: &mut Row, result: &RunResult) {
    let counts = result.transactions.as_ref();
    let count =
        |value: fn(&TransactionCounts) -> u64| counts.map(|counts| value(counts).to_string()).unwrap_or_default();
    let parameters = &result.parameters;
    row.push("transaction_mode", counts.map(|_| parameters.transaction_mode.as_str()).unwrap_or_default());
    row.push("transaction_keys", counts.map(|_| parameters.transaction_key_count.to_string()).unwrap_or_default());
    row.push("transaction_attempts", count(|counts| counts.attempts));
    row.push("transaction_committed", count(|counts| counts.committed));
    row.push("transaction_aborts_conflict", count(|counts| counts.conflicts));
    row.push("transaction_aborts_deadlock", count(|counts| counts.deadlocks));
    row.push("transaction_aborts_timeout", count(|counts| counts.lock_timeouts));
    row.push("transaction_abort_rate", optional(counts.and_then(TransactionCounts::abort_rate)));
}

/// A latency column suffix and how to read it from a summary.
type LatencyField = (&'static str, fn(&LatencySummary) -> f64);

fn push_latency(row: &mut Row, prefix: &str, summary: Option<&LatencySummary>) {
    let fields: [LatencyField; 10] = [
        ("avg_us", |s| s.average_us),
        ("stddev_us", |s| s.stddev_us),
        ("cv_percent", |s| s.cv_percent),
        ("p50_us", |s| s.p50_us),
        ("p95_us", |s| s.p95_us),
        ("p99_us", |s| s.p99_us),
        ("p999_us", |s| s.p999_us),
        ("min_us", |s| s.min_us),
        ("max_us", |s| s.max_us),
        ("count", |s| s.count as f64),
    ];
    for (suffix, value) in fields {
        row.push(&format!("{prefix}_{suffix}"), summary.map(|summary| number(value(summary))).unwrap_or_default());
    }
}

/// Quotes a field when it needs it.
fn escape(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// One CSV line (without the line break).
pub fn format_line<'a>(fields: impl Iterator<Item = &'a str>) -> String {
    fields.map(escape).collect::<Vec<_>>().join(",")
}

/// Splits CSV text into records of fields (quoted fields may hold commas and line breaks).
pub fn parse_records(text: &str) -> Result<Vec<Vec<String>>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut in_quotes = false;
    let mut characters = text.chars().peekable();
    let mut line = 1;
    while let Some(character) = characters.next() {
        if in_quotes {
            match character {
                '"' if characters.peek() == Some(&'"') => {
                    characters.next();
                    field.push('"');
                }
                '"' => in_quotes = false,
                other => {
                    if other == '\n' {
                        line += 1;
                    }
                    field.push(other);
                }
            }
            continue;
        }
        match character {
            '"' if field.is_empty() => in_quotes = true,
            ',' => record.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
                line += 1;
            }
            other => field.push(other),
        }
    }
    if in_quotes {
        bail!("unterminated quoted field at line {line}");
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    Ok(records)
}

/// Reads every row of a results file.
pub fn read_rows(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let records = parse_records(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut records = records.into_iter().filter(|record| !(record.len() == 1 && record[0].is_empty()));
    let Some(header) = records.next() else {
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();
    for (number, record) in records.enumerate() {
        if record.len() != header.len() {
            bail!("{}: row {} has {} fields, the header {}", path.display(), number + 2, record.len(), header.len());
        }
        let mut row = Row::new();
        for (name, value) in header.iter().zip(record) {
            row.push(name, value);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Writes rows (all with the columns of the first) to a new file.
pub fn write_rows(path: &Path, rows: &[Row]) -> Result<()> {
    let mut text = String::new();
    if let Some(first) = rows.first() {
        text.push_str(&format_line(first.names()));
        text.push('\n');
        for row in rows {
            text.push_str(&format_line(first.names().map(|name| row.text(name))));
            text.push('\n');
        }
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Appends a run's row to a results file, writing the header when the file is new.
pub fn append_result(path: &Path, result: &RunResult) -> Result<()> {
    let row = Row::from_result(result);
    let header = format_line(row.names());
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let mut text = String::new();
    match existing.lines().next() {
        None => {
            text.push_str(&header);
            text.push('\n');
        }
        Some(first_line) if first_line != header => {
            bail!("{} has other columns than this build writes; use a new file", path.display());
        }
        Some(_) => {}
    }
    text.push_str(&format_line(row.values()));
    text.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::workload::RunParameters;

    pub(crate) fn sample_result(test: &str, ops_per_second: f64) -> RunResult {
        RunResult {
            test: test.to_string(),
            engine: "riptide".to_string(),
            parameters: RunParameters::default(),
            operations_done: 1000,
            duration_seconds: 1000.0 / ops_per_second,
            ops_per_second,
            latency_unit: "op".to_string(),
            logical_write_bytes: 116_000,
            resources: crate::metrics::ResourceUse { write_bytes: 232_000, ..Default::default() },
            ..RunResult::default()
        }
    }

    #[test]
    fn quoting_round_trips() {
        let fields = ["plain", "with,comma", "with \"quotes\"", "two\nlines", ""];
        let line = format_line(fields.iter().copied());
        let records = parse_records(&format!("{line}\n")).unwrap();
        assert_eq!(records, vec![fields.iter().map(|field| field.to_string()).collect::<Vec<_>>()]);
        assert!(parse_records("\"open").is_err());
    }

    #[test]
    fn appended_rows_read_back() {
        let path = std::env::temp_dir().join(format!("riptide-bench-csv-{}.csv", std::process::id()));
        let _ = std::fs::remove_file(&path);
        append_result(&path, &sample_result("first", 1000.0)).unwrap();
        append_result(&path, &sample_result("second, with comma", 2000.0)).unwrap();
        let rows = read_rows(&path).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].text("test"), "first");
        assert_eq!(rows[1].text("test"), "second, with comma");
        assert_eq!(rows[1].number("ops_per_second"), Some(2000.0));
        assert_eq!(rows[0].number("write_amplification"), Some(2.0));
        // A read-only run has no write amplification: the field is empty, not 0 or NaN.
        assert_eq!(rows[0].number("read_amplification"), None);
        assert_eq!(rows[0].text("read_amplification"), "");
        // Mixed-only fields are empty for other runs.
        assert_eq!(rows[0].text("get_latency_p99_us"), "");
        // Rewriting keeps every field.
        let copy = path.with_extension("copy.csv");
        write_rows(&copy, &rows).unwrap();
        assert_eq!(read_rows(&copy).unwrap(), rows);
        // A file with another layout is refused rather than silently mixed.
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        assert!(append_result(&path, &sample_result("third", 1.0)).is_err());
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&copy).unwrap();
    }

    #[test]
    fn stall_columns_are_seconds_and_counts_or_empty() {
        let unknown = Row::from_result(&sample_result("unknown", 1000.0));
        assert_eq!((unknown.text("write_stall_seconds"), unknown.text("write_stall_count")), ("", ""));
        let stalls = crate::engine::WriteStalls { stall_micros: 1_500_250, stall_count: 7 };
        let stalled = RunResult { write_stalls: Some(stalls), ..sample_result("stalled", 1000.0) };
        let row = Row::from_result(&stalled);
        assert_eq!(row.number("write_stall_seconds"), Some(1.50025));
        assert_eq!(row.text("write_stall_count"), "7");
        let none = RunResult { write_stalls: Some(Default::default()), ..sample_result("none", 1000.0) };
        assert_eq!(Row::from_result(&none).text("write_stall_seconds"), "0");
        // The counters are cumulative; a phase's figure is the difference, never negative.
        let later = crate::engine::WriteStalls { stall_micros: 2_000_000, stall_count: 9 };
        assert_eq!(later.since(&stalls), crate::engine::WriteStalls { stall_micros: 499_750, stall_count: 2 });
        assert_eq!(stalls.since(&later), crate::engine::WriteStalls::default());
    }

    #[test]
    fn transaction_columns_round_trip_and_stay_empty_elsewhere() {
        let counts =
            TransactionCounts { attempts: 1000, committed: 900, conflicts: 70, deadlocks: 20, lock_timeouts: 10 };
        let parameters = RunParameters {
            workload: crate::workload::Workload::Transaction,
            transaction_mode: crate::engine::TransactionMode::Optimistic,
            transaction_key_count: 5000,
            ..RunParameters::default()
        };
        let transactional = RunResult {
            transactions: Some(counts),
            parameters,
            latency_unit: "txn".to_string(),
            ..sample_result("transaction_optimistic_zipfian_1K_t1", 900.0)
        };
        let path = std::env::temp_dir().join(format!("riptide-bench-csv-transactions-{}.csv", std::process::id()));
        let _ = std::fs::remove_file(&path);
        append_result(&path, &transactional).unwrap();
        append_result(&path, &sample_result("plain", 1000.0)).unwrap();
        let rows = read_rows(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let row = &rows[0];
        assert_eq!(row.text("workload"), "transaction");
        assert_eq!(row.text("transaction_mode"), "optimistic");
        assert_eq!(row.number("transaction_keys"), Some(5000.0));
        assert_eq!(row.number("transaction_attempts"), Some(1000.0));
        assert_eq!(row.number("transaction_committed"), Some(900.0));
        assert_eq!(row.number("transaction_aborts_conflict"), Some(70.0));
        assert_eq!(row.number("transaction_aborts_deadlock"), Some(20.0));
        assert_eq!(row.number("transaction_aborts_timeout"), Some(10.0));
        assert_eq!(row.number("transaction_abort_rate"), Some(0.1));
        assert_eq!(row.text("latency_unit"), "txn");
        // Other runs leave every transaction column empty.
        for name in rows[1].names().filter(|name| name.starts_with("transaction_")) {
            assert_eq!(rows[1].text(name), "", "{name}");
        }
        // A file written before the transaction columns existed still reads: the fields are absent.
        let old_path = path.with_extension("old.csv");
        let old_header: Vec<&str> = row.names().filter(|name| !name.starts_with("transaction_")).collect();
        let old_values: Vec<&str> = old_header.iter().map(|name| rows[1].text(name)).collect();
        let text = format!("{}\n{}\n", format_line(old_header.into_iter()), format_line(old_values.into_iter()));
        std::fs::write(&old_path, text).unwrap();
        let old_rows = read_rows(&old_path).unwrap();
        std::fs::remove_file(&old_path).unwrap();
        assert_eq!(old_rows[0].text("test"), "plain");
        assert_eq!(old_rows[0].get("transaction_attempts"), None);
        assert_eq!(old_rows[0].number("transaction_abort_rate"), None);
    }

    #[test]
    fn numbers_are_compact() {
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.125), "0.125");
        assert_eq!(number(f64::NAN), "");
        assert_eq!(number(0.0), "0");
    }
}
