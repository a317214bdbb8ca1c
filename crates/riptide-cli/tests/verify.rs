//! `verify DIR`: an intact database passes (exit code 0); damaged table blocks, missing or
//! truncated tables, damaged or missing blob files, mid-log damage and manifest damage are each reported with file and
//! offset (exit code 5); what the next open cleans up (a torn log tail, a stray table or blob file) is a
//! warning, which counts only with `--strict`.

mod common;

use common::{
    arg, corrupt_byte, current_manifest, database_in_tables, database_in_wal, files_with, run_expect, scratch, truncate,
};

#[test]
fn an_intact_database_passes() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    {
        let database = riptide::Db::open(&db, common::options()).expect("open");
        database.put(b"in the log", b"1").expect("put");
        database.close().expect("close");
    }
    let run = run_expect(&["verify", &arg(&db)], 0);
    assert!(run.stdout.contains("0 errors, 0 warnings"), "{}", run.stdout);
    run_expect(&["verify", &arg(&db), "--strict"], 0);
}

#[test]
fn a_damaged_table_block_is_reported_with_file_and_offset() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    let table = files_with(&db, ".sst").pop().expect("a table");
    corrupt_byte(&table, 700);
    let run = run_expect(&["verify", &arg(&db)], 5);
    let line = run.stdout.lines().find(|line| line.starts_with("error:")).expect("an error line");
    assert!(line.contains(&format!("{} at offset ", table.display())), "{line}");
    assert!(line.contains("checksum mismatch"), "{line}");
}

#[test]
fn missing_and_truncated_tables_are_errors() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 400);
    let table = files_with(&db, ".sst").pop().expect("a table");
    let size = std::fs::metadata(&table).expect("size").len();
    truncate(&table, size - 10);
    let run = run_expect(&["verify", &arg(&db)], 5);
    assert!(run.stdout.contains("the manifest records"), "{}", run.stdout);
    std::fs::remove_file(&table).expect("remove");
    let run = run_expect(&["verify", &arg(&db)], 5);
    assert!(run.stdout.contains("missing: the manifest lists it in level 0"), "{}", run.stdout);
}

#[test]
fn mid_log_damage_is_an_error_and_a_torn_tail_a_warning() {
    let (_dir, db) = scratch();
    database_in_wal(&db, 50);
    let log = files_with(&db, ".log").pop().expect("a log");
    let size = std::fs::metadata(&log).expect("size").len();
    truncate(&log, size - 5);
    let run = run_expect(&["verify", &arg(&db)], 0);
    assert!(run.stdout.contains("warning:") && run.stdout.contains("torn tail"), "{}", run.stdout);
    run_expect(&["verify", &arg(&db), "--strict"], 5);
    corrupt_byte(&log, size / 3);
    let run = run_expect(&["verify", &arg(&db)], 5);
    assert!(run.stdout.contains("damaged records in the middle of the log"), "{}", run.stdout);
}

#[test]
fn manifest_damage_is_an_error() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 100);
    {
        let database = riptide::Db::open(&db, common::options()).expect("open");
        database.put(b"extra", b"1").expect("put");
        database.flush().expect("flush adds a second manifest record");
        database.close().expect("close");
    }
    let manifest = current_manifest(&db);
    corrupt_byte(&manifest, 10);
    let run = run_expect(&["verify", &arg(&db)], 5);
    assert!(run.stdout.contains(&format!("error: {} at offset 0", manifest.display())), "{}", run.stdout);
}

#[test]
fn a_stray_table_is_a_warning() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 100);
    let table = files_with(&db, ".sst").pop().expect("a table");
    std::fs::copy(&table, db.join("999999.sst")).expect("copy");
    let run = run_expect(&["verify", &arg(&db)], 0);
    assert!(run.stdout.contains("999999.sst: extra file"), "{}", run.stdout);
    run_expect(&["verify", &arg(&db), "--strict"], 5);
}

#[test]
fn a_damaged_current_is_an_error() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 10);
    corrupt_byte(&db.join("CURRENT"), 0);
    let run = run_expect(&["verify", &arg(&db)], 5);
    assert!(run.stdout.contains("CURRENT at offset 0: CURRENT does not name a manifest"), "{}", run.stdout);
}

/// A database whose 300-byte values live in blob files (key-value separation).
fn database_with_blob_files(path: &std::path::Path) {
    let options = riptide::Options { min_blob_size_bytes: Some(200), ..common::options() };
    let db = riptide::Db::open(path, options).expect("open");
    for number in 0..50u64 {
        db.put(format!("key{number:04}").as_bytes(), &[b'v'; 300]).expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
}

#[test]
fn blob_files_are_checked_whole_and_damage_has_file_and_offset() {
    let (_dir, db) = scratch();
    database_with_blob_files(&db);
    let run = run_expect(&["verify", &arg(&db), "--strict"], 0);
    assert!(run.stdout.contains("0 errors, 0 warnings"), "{}", run.stdout);
    let blob = files_with(&db, ".blob").pop().expect("a blob file");
    // Each record is 13 bytes of framing (lengths, value type, checksum), the 7-byte key and the
    // stored value (LZ4-compressed: these values repeat); damage the second record's value.
    let file = riptide::internals::decode::blob_file(&std::fs::read(&blob).expect("read")).expect("decode");
    let second = &file.records[1];
    let stored = second.stored.len() as u64;
    assert!(second.value_type == 1 && stored < 300, "the value was stored compressed");
    corrupt_byte(&blob, second.offset + 9 + 7 + stored / 2);
    let run = run_expect(&["verify", &arg(&db)], 5);
    let line = run.stdout.lines().find(|line| line.starts_with("error:")).expect("an error line");
    // The offset is that of the damaged record's checksum, past the damaged byte.
    assert!(line.contains(&format!("{} at offset {}", blob.display(), second.offset + 9 + 7 + stored)), "{line}");
    assert!(line.contains("checksum mismatch"), "{line}");
    std::fs::remove_file(&blob).expect("remove");
    let run = run_expect(&["verify", &arg(&db)], 5);
    assert!(run.stdout.contains("missing: a live table references it"), "{}", run.stdout);
}

#[test]
fn a_stray_blob_file_is_a_warning() {
    let (_dir, db) = scratch();
    database_with_blob_files(&db);
    let blob = files_with(&db, ".blob").pop().expect("a blob file");
    std::fs::copy(&blob, db.join("999999.blob")).expect("copy");
    let run = run_expect(&["verify", &arg(&db)], 0);
    assert!(run.stdout.contains("a blob file no live table references"), "{}", run.stdout);
    run_expect(&["verify", &arg(&db), "--strict"], 5);
}
