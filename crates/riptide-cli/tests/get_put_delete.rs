//! `get`, `put`, `delete` and `delete-range`: values round-trip through the escaped, hex and JSON forms, a
//! missing key exits 1 with nothing on stdout, `put` creates a database only with
//! `--create`, and `put --ttl-secs` writes a key that expires.

mod common;

use common::{arg, run_expect, scratch};

#[test]
fn put_then_get_prints_the_value_and_delete_removes_it() {
    let (_dir, db) = scratch();
    run_expect(&["put", "--create", &arg(&db), "user:1", "alice"], 0);
    assert_eq!(run_expect(&["get", &arg(&db), "user:1"], 0).stdout, "alice\n");
    run_expect(&["delete", &arg(&db), "user:1", "--sync"], 0);
    let missing = run_expect(&["get", &arg(&db), "user:1"], 1);
    assert_eq!(missing.stdout, "", "a missing key prints nothing");
    run_expect(&["delete", &arg(&db), "never-written"], 0);
}

#[test]
fn put_with_a_ttl_expires_the_key_that_many_seconds_later() {
    let (_dir, db) = scratch();
    run_expect(&["put", "--create", &arg(&db), "session", "alice", "--ttl-secs", "3600"], 0);
    assert_eq!(run_expect(&["get", &arg(&db), "session"], 0).stdout, "alice\n");
    run_expect(&["put", &arg(&db), "session", "bob", "--ttl-secs", "0"], 2);
    // Read with a clock moved almost an hour ahead, then an hour and a second: the key has
    // expired only then.
    let now_us = {
        let database = riptide::Db::open(&db, riptide::Options::default()).expect("open");
        database.now_us()
    };
    for (ahead_us, expected) in [(3_500_000_000, Some(&b"alice"[..])), (3_601_000_000, None)] {
        let clock = std::sync::Arc::new(riptide::ManualClock::new(now_us + ahead_us));
        let database = riptide::Db::open(&db, riptide::Options { clock, ..riptide::Options::default() }).expect("open");
        assert_eq!(database.get(b"session").expect("get").as_deref(), expected, "{ahead_us} us ahead");
    }
}

#[test]
fn delete_range_removes_the_keys_between_its_bounds() {
    let (_dir, db) = scratch();
    for key in ["a", "b", "c", "d"] {
        run_expect(&["put", "--create", &arg(&db), key, "v"], 0);
    }
    run_expect(&["delete-range", &arg(&db), "b", "d", "--sync"], 0);
    assert_eq!(run_expect(&["scan", &arg(&db), "--keys-only"], 0).stdout, "a\nd\n");
}

#[test]
fn binary_keys_and_values_round_trip_escaped_and_in_hex() {
    let (_dir, db) = scratch();
    run_expect(&["put", "--create", &arg(&db), "k\\x00\\xff\\t", "line\\none\\\\"], 0);
    assert_eq!(run_expect(&["get", &arg(&db), "k\\x00\\xFF\\t"], 0).stdout, "line\\none\\\\\n");
    assert_eq!(run_expect(&["--hex", "get", &arg(&db), "6b00ff09"], 0).stdout, "6c696e650a6f6e655c\n");
    let database = riptide::Db::open(&db, riptide::Options::default()).expect("open");
    assert_eq!(database.get(b"k\x00\xff\t").expect("get").as_deref(), Some(&b"line\none\\"[..]));
}

#[test]
fn hex_input_writes_the_bytes_it_names() {
    let (_dir, db) = scratch();
    run_expect(&["--hex", "put", "--create", &arg(&db), "0001", "ff"], 0);
    assert_eq!(run_expect(&["get", &arg(&db), "\\x00\\x01"], 0).stdout, "\\xff\n");
}

#[test]
fn json_get_prints_one_object() {
    let (_dir, db) = scratch();
    run_expect(&["put", "--create", &arg(&db), "a\"b", "v"], 0);
    assert_eq!(run_expect(&["--json", "get", &arg(&db), "a\"b"], 0).stdout, "{\"key\":\"a\\\"b\",\"value\":\"v\"}\n");
}

#[test]
fn put_without_create_refuses_a_missing_database() {
    let (_dir, db) = scratch();
    let run = run_expect(&["put", &arg(&db), "k", "v"], 3);
    assert!(run.stderr.contains("no such directory"), "{}", run.stderr);
    assert!(!db.exists(), "nothing may be created without --create");
}
