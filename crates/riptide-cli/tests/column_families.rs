//! Column families: `list-cf`, `create-cf` (with the reverse order), `drop-cf`, `--cf` on the
//! data commands, and a missing column family (exit code 3).

mod common;

use common::{arg, run_expect, scratch};

#[test]
fn create_list_use_and_drop_column_families() {
    let (_dir, db) = scratch();
    let db = arg(&db);
    run_expect(&["put", "--create", &db, "k", "default value"], 0);
    run_expect(&["create-cf", &db, "users"], 0);
    run_expect(&["create-cf", &db, "descending", "--comparator", "reverse-bytewise"], 0);
    assert_eq!(run_expect(&["list-cf", &db], 0).lines(), ["default", "users", "descending"]);
    assert_eq!(run_expect(&["--json", "list-cf", &db], 0).lines()[0], "{\"name\":\"default\"}");
    run_expect(&["put", &db, "--cf", "users", "k", "user value"], 0);
    assert_eq!(run_expect(&["get", &db, "--cf", "users", "k"], 0).stdout, "user value\n");
    assert_eq!(run_expect(&["get", &db, "k"], 0).stdout, "default value\n");
    for key in ["a", "c", "b"] {
        run_expect(&["put", &db, "--cf", "descending", key, "x"], 0);
    }
    // The reverse order is kept across reopens: the tool opens each family with its comparator.
    assert_eq!(run_expect(&["scan", &db, "--cf", "descending", "--keys-only"], 0).lines(), ["c", "b", "a"]);
    run_expect(&["drop-cf", &db, "users"], 0);
    assert_eq!(run_expect(&["list-cf", &db], 0).lines(), ["default", "descending"]);
}

#[test]
fn a_missing_column_family_exits_3_and_names_the_existing_ones() {
    let (_dir, db) = scratch();
    let db = arg(&db);
    run_expect(&["put", "--create", &db, "k", "v"], 0);
    for command in [
        vec!["get", &db, "--cf", "nope", "k"],
        vec!["put", &db, "--cf", "nope", "k", "v"],
        vec!["scan", &db, "--cf", "nope"],
        vec!["drop-cf", &db, "nope"],
    ] {
        let run = run_expect(&command, 3);
        assert!(run.stderr.contains("no column family \"nope\"") && run.stderr.contains("default"), "{}", run.stderr);
    }
    let run = run_expect(&["create-cf", &db, "default"], 7);
    assert!(run.stderr.contains("exists"), "{}", run.stderr);
}
