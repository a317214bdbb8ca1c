//! Smoke tests: every workload and every key pattern on Riptide (and transactions in both
//! modes) with a few thousand operations, through the library and through the binary, checking
//! the counts each run must produce and the files it must write. RocksDB is not needed (it is
//! compiled only with `--features rocksdb`).

use std::path::{Path, PathBuf};
use std::process::Command;

use riptide_bench::csv::read_rows;
use riptide_bench::engine::EngineKind;
use riptide_bench::keys::KeyPattern;
use riptide_bench::workload::{run, run_and_record, RunParameters, RunResult, Workload};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("riptide-bench-smoke-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn parameters(scratch: &Scratch, workload: Workload, pattern: KeyPattern, operations: u64) -> RunParameters {
    RunParameters {
        engine: EngineKind::Riptide,
        workload,
        pattern,
        operations,
        threads: 3,
        batch_size: 50,
        range_size: 20,
        db_path: Some(scratch.path().to_path_buf()),
        // Small memtables so that flushes and compactions happen even in a short run.
        memtable_size_bytes: 64 << 10,
        progress_seconds: 0.0,
        ..RunParameters::default()
    }
}

fn run_ok(parameters: &RunParameters) -> RunResult {
    let result = run(parameters).unwrap_or_else(|error| panic!("{}: {error}", parameters.effective_test_name())).result;
    assert_eq!(result.operations_done, parameters.operations, "{}", result.test);
    assert!(!result.capped);
    assert!(result.ops_per_second > 0.0);
    assert!(result.duration_seconds > 0.0);
    assert!(result.peak_rss_bytes > 0);
    assert!(result.db_size_bytes > 0, "{}: the database must hold files", result.test);
    result
}

#[test]
fn every_workload_and_pattern_runs_on_riptide() {
    let scratch = Scratch::new("workloads");
    let operations = 3000u64;
    let record_bytes = 16 + 100;
    let patterns = [
        KeyPattern::Seq,
        KeyPattern::Random,
        KeyPattern::Zipfian,
        KeyPattern::Uniform,
        KeyPattern::Timestamp,
        KeyPattern::Reverse,
    ];
    for pattern in patterns {
        let injective = pattern.is_injective();

        let write = run_ok(&parameters(&scratch, Workload::Write, pattern, operations));
        assert_eq!(write.latency.count, operations.div_ceil(50), "one latency sample per batch");
        assert_eq!(write.latency_unit, "batch");
        assert_eq!(write.logical_write_bytes, operations * record_bytes);
        if injective {
            assert_eq!(write.live_keys, operations, "{pattern:?} writes every key once");
        } else {
            assert!(write.live_keys > 0 && write.live_keys < operations, "{pattern:?}: {} live", write.live_keys);
        }
        assert!(write.write_amplification().unwrap() > 0.0);
        assert!(write.space_amplification().unwrap() > 0.0);

        let read = run_ok(&parameters(&scratch, Workload::Read, pattern, operations));
        assert_eq!(read.latency.count, operations, "one latency sample per get");
        assert_eq!(read.latency_unit, "op");
        assert!(read.populate_seconds > 0.0);
        assert_eq!(read.logical_write_bytes, 0);
        assert_eq!(read.write_amplification(), None);
        if injective {
            assert_eq!(read.found, operations, "{pattern:?} reads populated keys only");
            assert_eq!(read.logical_read_bytes, operations * record_bytes);
        } else {
            assert!(read.found > operations / 3 && read.found < operations, "{pattern:?}: {} found", read.found);
        }

        let mixed = run_ok(&parameters(&scratch, Workload::Mixed, pattern, operations));
        let get_latency = mixed.get_latency.expect("mixed runs time their gets");
        assert_eq!(get_latency.count + mixed.logical_write_bytes / record_bytes, operations);
        assert!(mixed.put_ops_per_second.is_some() && mixed.get_ops_per_second.is_some());
        if injective {
            assert_eq!(mixed.found, get_latency.count, "{pattern:?} gets read keys the thread wrote");
        }

        let delete = run_ok(&parameters(&scratch, Workload::Delete, pattern, operations));
        assert_eq!(delete.logical_write_bytes, operations * 16);
        if injective {
            assert_eq!(delete.live_keys, 0, "{pattern:?} deletes every populated key");
            assert_eq!(delete.space_amplification(), None);
        }

        let seek = run_ok(&parameters(&scratch, Workload::Seek, pattern, operations));
        if injective {
            assert_eq!(seek.found, operations);
            assert_eq!(seek.logical_read_bytes, operations * record_bytes);
        }

        let range = run_ok(&parameters(&scratch, Workload::Range, pattern, operations / 10));
        if injective {
            // Scans near the end of the key space stop early; most read all 20 entries.
            let entries = range.logical_read_bytes / record_bytes;
            assert!(entries > operations / 10 * 15 && entries <= operations / 10 * 20, "{entries} entries");
        }
    }
    // Every run deleted its database directory.
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}

#[test]
fn single_puts_synced_writes_and_time_caps() {
    let scratch = Scratch::new("single");
    let single = RunParameters { batch_size: 1, ..parameters(&scratch, Workload::Write, KeyPattern::Random, 2000) };
    let result = run_ok(&single);
    assert_eq!(result.latency.count, 2000);
    assert_eq!(result.latency_unit, "op");
    let synced = RunParameters { sync: true, ..single.clone() };
    let result = run_ok(&RunParameters { operations: 200, ..synced });
    assert_eq!(result.live_keys, 200);
    let capped = RunParameters { operations: 50_000_000, max_seconds: 0.3, ..single };
    let result = run(&capped).unwrap().result;
    assert!(result.capped, "a 50M-operation run cannot finish in 0.3 s");
    assert!(result.operations_done < 50_000_000);
    assert_eq!(result.live_keys, result.operations_done, "live keys follow the operations done");
}

#[test]
fn recorded_outputs_are_written() {
    let scratch = Scratch::new("outputs");
    let databases = scratch.path().join("databases");
    let csv = scratch.path().join("results.csv");
    let timeseries = scratch.path().join("timeseries.csv");
    let report = scratch.path().join("report.md");
    let config = scratch.path().join("config.txt");
    let base = RunParameters {
        db_path: Some(databases),
        csv: Some(csv.clone()),
        timeseries: Some(timeseries.clone()),
        report: Some(report.clone()),
        config_dump: Some(config.clone()),
        ..parameters(&scratch, Workload::Write, KeyPattern::Seq, 2000)
    };
    run_and_record(&base).unwrap();
    run_and_record(&RunParameters { workload: Workload::Read, ..base }).unwrap();
    let rows = read_rows(&csv).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].text("test"), "write_seq_2K_t3_b50");
    assert_eq!(rows[1].text("workload"), "read");
    assert_eq!(rows[1].number("found"), Some(2000.0));
    assert!(rows[0].number("write_amplification").is_some());
    // Riptide reports its stalls, so every row has the stall columns filled in.
    assert!(rows
        .iter()
        .all(|row| row.number("write_stall_seconds").is_some() && row.number("write_stall_count").is_some()));
    let samples = std::fs::read_to_string(&timeseries).unwrap();
    assert!(samples.starts_with("test,engine,elapsed_seconds"));
    assert!(samples.lines().count() >= 3);
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("## Throughput") && text.contains("read_seq_2K_t3"), "{text}");
    assert!(std::fs::read_to_string(&config).unwrap().contains("memtable_size_bytes"));
}

#[test]
fn binary_runs_reports_and_compares() {
    let scratch = Scratch::new("binary");
    let binary = env!("CARGO_BIN_EXE_riptide-bench");
    for (name, operations) in [("before", "3000"), ("after", "3000")] {
        let status = Command::new(binary)
            .args(["run", "-w", "write", "-p", "random", "-o", operations, "-t", "2", "-b", "100"])
            .args(["--test-name", "cli_write", "--progress-seconds", "0"])
            .arg("--db-path")
            .arg(scratch.path())
            .arg("--csv")
            .arg(scratch.path().join(format!("{name}.csv")))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let output = Command::new(binary)
        .arg("compare")
        .arg(scratch.path().join("before.csv"))
        .arg(scratch.path().join("after.csv"))
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("| cli_write | riptide |"), "{text}");
    assert!(text.contains("geometric mean throughput ratio"));
    // A results directory with a CSV gets a report (no charts asked for).
    let directory = scratch.path().join("suite");
    std::fs::create_dir_all(&directory).unwrap();
    std::fs::copy(scratch.path().join("after.csv"), directory.join("results.csv")).unwrap();
    let status = Command::new(binary).arg("report").arg(&directory).arg("--no-plots").status().unwrap();
    assert!(status.success());
    let report = std::fs::read_to_string(directory.join("report.md")).unwrap();
    assert!(report.contains("No test ran on both engines"));
    assert!(report.contains("### riptide"), "the configuration of the engine that ran is printed");
    // Bad input is an error with a message, not a panic.
    let output = Command::new(binary).args(["run", "-o", "0"]).output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--operations must be positive"));
}

#[test]
fn transactions_run_in_both_modes_through_the_binary() {
    let scratch = Scratch::new("transactions");
    let binary = env!("CARGO_BIN_EXE_riptide-bench");
    let directory = scratch.path().join("results");
    std::fs::create_dir_all(&directory).unwrap();
    let csv = directory.join("results.csv");
    for (mode, pattern) in [("pessimistic", "uniform"), ("optimistic", "zipfian")] {
        let output = Command::new(binary)
            .args(["run", "-w", "transaction", "--transaction-mode", mode, "-p", pattern, "-o", "600", "-t", "3"])
            .args(["--transaction-keys", "500", "--progress-seconds", "0"])
            .arg("--db-path")
            .arg(scratch.path())
            .arg("--csv")
            .arg(&csv)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains(&format!("transactions ({mode}):")), "{stdout}");
        assert!(stdout.contains("txn latency"), "{stdout}");
    }
    let rows = read_rows(&csv).unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let number = |name: &str| row.number(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(number("transaction_attempts"), 600.0);
        let aborts = number("transaction_aborts_conflict")
            + number("transaction_aborts_deadlock")
            + number("transaction_aborts_timeout");
        assert_eq!(number("transaction_committed") + aborts, 600.0);
        assert_eq!(number("operations_done"), number("transaction_committed"));
        // The CSV keeps six decimals.
        assert!((number("transaction_abort_rate") - aborts / 600.0).abs() < 1e-6);
        assert_eq!(number("live_keys"), 500.0);
    }
    assert_eq!(rows[0].text("test"), "transaction_pessimistic_uniform_600_t3_keys500");
    let status = Command::new(binary).arg("report").arg(&directory).arg("--no-plots").status().unwrap();
    assert!(status.success());
    let report = std::fs::read_to_string(directory.join("report.md")).unwrap();
    assert!(report.contains("## Transactions"), "{report}");
    // Transactions draw their keys: an injective pattern is refused before anything opens.
    let output = Command::new(binary).args(["run", "-w", "transaction", "-p", "random"]).output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("uniform or zipfian"));
}
