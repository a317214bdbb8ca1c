//! `stats` prints the engine's statistics; `compact` compacts a range (or everything) of a
//! column family and keeps every pair.

mod common;

use common::{arg, database_in_tables, key, run_expect, scratch, value};

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
