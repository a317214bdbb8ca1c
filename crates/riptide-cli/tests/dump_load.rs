//! `dump` and `load`: a column family survives the round trip through a dump file or stdout,
//! `load --create` creates the database and the column family, and a damaged dump is refused
//! whole (exit code 5, nothing loaded).

mod common;

use common::{arg, corrupt_byte, database_in_tables, run_expect, scratch, truncate};

#[test]
fn a_dump_loads_into_another_database() {
    let (dir, source) = scratch();
    database_in_tables(&source, 300);
    let dump = dir.path().join("default.dump");
    let run = run_expect(&["dump", &arg(&source), "--output", &arg(&dump)], 0);
    assert!(run.stderr.contains("dumped 300 pairs"), "{}", run.stderr);
    let target = dir.path().join("target");
    let run = run_expect(&["load", &arg(&target), &arg(&dump), "--create", "--cf", "copy"], 0);
    assert!(run.stderr.contains("loaded 300 pairs"), "{}", run.stderr);
    assert!(!run.stderr.contains('\r') && !run.stderr.contains('\u{1b}'), "no progress bar off a terminal");
    let original = run_expect(&["scan", &arg(&source)], 0).stdout;
    assert_eq!(run_expect(&["scan", &arg(&target), "--cf", "copy"], 0).stdout, original);
}

#[test]
fn a_dump_on_stdout_is_the_same_file() {
    let (dir, source) = scratch();
    database_in_tables(&source, 50);
    let dump = dir.path().join("file.dump");
    run_expect(&["dump", &arg(&source), "-o", &arg(&dump)], 0);
    let output =
        std::process::Command::new(env!("CARGO_BIN_EXE_riptide")).args(["dump", &arg(&source)]).output().expect("run");
    assert!(output.status.success());
    assert_eq!(output.stdout, std::fs::read(&dump).expect("read"));
    assert_eq!(&output.stdout[..8], b"RIPTDUMP");
}

#[test]
fn a_damaged_or_truncated_dump_loads_nothing() {
    let (dir, source) = scratch();
    database_in_tables(&source, 50);
    let dump = dir.path().join("file.dump");
    run_expect(&["dump", &arg(&source), "-o", &arg(&dump)], 0);
    let size = std::fs::metadata(&dump).expect("size").len();
    let target = dir.path().join("target");
    run_expect(&["put", "--create", &arg(&target), "marker", "1"], 0);
    corrupt_byte(&dump, size / 2);
    let run = run_expect(&["load", &arg(&target), &arg(&dump)], 5);
    assert!(run.stderr.contains("checksum mismatch") || run.stderr.contains("invalid dump"), "{}", run.stderr);
    corrupt_byte(&dump, size / 2);
    truncate(&dump, size - 3);
    let run = run_expect(&["load", &arg(&target), &arg(&dump)], 5);
    assert!(run.stderr.contains("truncated"), "{}", run.stderr);
    assert_eq!(run_expect(&["scan", &arg(&target), "--count"], 0).stdout, "1\n", "nothing was loaded");
    run_expect(&["load", &arg(&target), &arg(&dir.path().join("absent.dump"))], 3);
}
