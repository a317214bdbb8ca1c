//! `stats` prints the engine's statistics; `compact` compacts a range (or everything) of a
//! column family and keeps every pair; `checkpoint` writes a copy that opens with every pair.

mod common;

use common::{arg, database_in_tables, key, run, run_expect, scratch, value};

#[test]
fn stats_prints_levels_and_column_families() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 100);
    let stats = run_expect(&["stats", &arg(&db)], 0);
    assert!(stats.stdout.contains("L0") && stats.stdout.contains("column family 0 (default"), "{}", stats.stdout);
}

#[test]
fn compact_with_and_without_bounds_keeps_every_pair() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    let database = arg(&db);
    run_expect(&["compact", &database, "--from", "key000100", "--to", "key000200"], 0);
    run_expect(&["compact", &database], 0);
    let scan = run_expect(&["scan", &database], 0);
    let expected: Vec<String> = (0..400)
        .map(|i| format!("{}\t{}", String::from_utf8(key(i)).unwrap(), String::from_utf8(value(i, 1, 60)).unwrap()))
        .collect();
    assert_eq!(scan.lines(), expected);
    let stats = run_expect(&["stats", &database], 0);
    let level0 = stats.stdout.lines().find(|line| line.starts_with("L0")).expect("L0 line");
    assert!(level0.split_whitespace().nth(1) == Some("0"), "level 0 is empty after a full compaction: {level0}");
    run_expect(&["compact", &database, "--cf", "missing"], 3);
}

#[test]
fn checkpoint_writes_a_copy_with_every_pair_into_a_new_directory_only() {
    let (dir, db) = scratch();
    database_in_tables(&db, 300);
    let database = arg(&db);
    let target = arg(&dir.path().join("copy"));
    run_expect(&["put", &database, "only-in-the-log", "yes"], 0);
    let written = run_expect(&["checkpoint", &database, &target], 0);
    assert!(written.stdout.contains("checkpoint written"), "{}", written.stdout);
    assert_eq!(run_expect(&["scan", &target], 0).lines(), run_expect(&["scan", &database], 0).lines());
    assert_eq!(run_expect(&["get", &target, "only-in-the-log"], 0).stdout.trim_end(), "yes");
    // The directory exists now: a second checkpoint into it is refused (the engine's
    // InvalidArgument, exit code 7).
    let refused = run(&["checkpoint", &database, &target]);
    assert_eq!(refused.code, 7);
    assert!(refused.stderr.contains("already exists"), "{}", refused.stderr);
}
