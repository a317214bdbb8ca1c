//! `inspect wal|sst|manifest FILE`: records, blocks, properties and checksums of intact files
//! (exit code 0), damage located by offset (exit code 5), and a missing file (exit code 3).

mod common;

use common::{
    arg, corrupt_byte, current_manifest, database_in_tables, database_in_wal, files_with, run_expect, scratch,
};

#[test]
fn an_intact_log_shows_every_record_and_batch() {
    let (_dir, db) = scratch();
    database_in_wal(&db, 10);
    let log = files_with(&db, ".log").pop().expect("a log");
    let run = run_expect(&["inspect", "wal", &arg(&log), "--entries"], 0);
    assert!(run.stdout.contains("10 valid records"), "{}", run.stdout);
    assert!(run.stdout.contains("record at 0:") && run.stdout.contains("checksum 0x"), "{}", run.stdout);
    assert!(run.stdout.contains("put cf 0 key000000 = v0.1:"), "{}", run.stdout);
}

#[test]
fn an_intact_table_shows_footer_properties_and_blocks() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    let table = files_with(&db, ".sst").pop().expect("a table");
    let run = run_expect(&["inspect", "sst", &arg(&table)], 0);
    for expected in
        ["footer at", "properties:", "entries 400 (0 deletes)", "comparator riptide.bytewise", "data block at 0", "ok"]
    {
        assert!(run.stdout.contains(expected), "missing {expected:?} in {}", run.stdout);
    }
    let entries = run_expect(&["inspect", "sst", &arg(&table), "--entries"], 0);
    assert!(entries.stdout.contains("key000398xx @ 399 put = v398.1:"), "{}", entries.stdout);
}

#[test]
fn a_manifest_shows_its_edits() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 100);
    let run = run_expect(&["inspect", "manifest", &arg(&current_manifest(&db))], 0);
    for expected in ["record at 0:", "comparator \"riptide.bytewise\"", "next file number", "add to level 0: table"] {
        assert!(run.stdout.contains(expected), "missing {expected:?} in {}", run.stdout);
    }
}

#[test]
fn table_damage_is_located_and_exits_5() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    let table = files_with(&db, ".sst").pop().expect("a table");
    corrupt_byte(&table, 100);
    let run = run_expect(&["inspect", "sst", &arg(&table)], 5);
    assert!(run.stdout.contains("MISMATCH") && run.stdout.contains("DAMAGED: bytes 0.."), "{}", run.stdout);
}

#[test]
fn log_damage_is_located_and_exits_5() {
    let (_dir, db) = scratch();
    database_in_wal(&db, 50);
    let log = files_with(&db, ".log").pop().expect("a log");
    let size = std::fs::metadata(&log).expect("size").len();
    corrupt_byte(&log, size / 3);
    let run = run_expect(&["inspect", "wal", &arg(&log)], 5);
    assert!(run.stdout.contains("DAMAGED: bytes") && run.stdout.contains("checksum mismatch"), "{}", run.stdout);
}

#[test]
fn a_missing_file_exits_3() {
    let (dir, _db) = scratch();
    let run = run_expect(&["inspect", "sst", &arg(&dir.path().join("000001.sst"))], 3);
    assert!(run.stderr.contains("no such file"), "{}", run.stderr);
}
