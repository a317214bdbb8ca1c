//! `scan`: one pair per line in order, bounds (`--from` inclusive, `--to` exclusive),
//! `--limit`, `--reverse`, `--count`, `--keys-only`, `--json` and `--hex`.

mod common;

use common::{arg, run_expect, scratch};

fn database() -> (common::Scratch, String) {
    let (dir, db) = scratch();
    let database = riptide::Db::open(&db, riptide::Options::default()).expect("open");
    for (key, value) in [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4\t4")] {
        database.put(key.as_bytes(), value.as_bytes()).expect("put");
    }
    database.close().expect("close");
    (dir, arg(&db))
}

#[test]
fn scan_prints_every_pair_tab_separated_in_order() {
    let (_dir, db) = database();
    assert_eq!(run_expect(&["scan", &db], 0).stdout, "a\t1\nb\t2\nc\t3\nd\t4\\t4\n");
}

#[test]
fn bounds_limit_and_reverse() {
    let (_dir, db) = database();
    assert_eq!(run_expect(&["scan", &db, "--from", "b", "--to", "d"], 0).lines(), ["b\t2", "c\t3"]);
    assert_eq!(run_expect(&["scan", &db, "--limit", "2"], 0).lines(), ["a\t1", "b\t2"]);
    assert_eq!(run_expect(&["scan", &db, "--reverse", "--limit", "2"], 0).lines(), ["d\t4\\t4", "c\t3"]);
    assert_eq!(run_expect(&["scan", &db, "--reverse", "--from", "b", "--to", "d"], 0).lines(), ["c\t3", "b\t2"]);
}

#[test]
fn count_keys_only_json_and_hex() {
    let (_dir, db) = database();
    assert_eq!(run_expect(&["scan", &db, "--count"], 0).stdout, "4\n");
    assert_eq!(run_expect(&["scan", &db, "--count", "--from", "c"], 0).stdout, "2\n");
    assert_eq!(run_expect(&["--json", "scan", &db, "--count"], 0).stdout, "{\"count\":4}\n");
    assert_eq!(run_expect(&["scan", &db, "--keys-only"], 0).lines(), ["a", "b", "c", "d"]);
    assert_eq!(run_expect(&["--json", "scan", &db, "--limit", "1"], 0).stdout, "{\"key\":\"a\",\"value\":\"1\"}\n");
    assert_eq!(run_expect(&["--hex", "scan", &db, "--from", "64"], 0).stdout, "64\t340934\n");
}

#[test]
fn an_empty_range_prints_nothing() {
    let (_dir, db) = database();
    assert_eq!(run_expect(&["scan", &db, "--from", "x"], 0).stdout, "");
}
