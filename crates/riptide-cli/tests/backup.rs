//! `backup`, `list-backups`, `verify-backup`, `restore` and `delete-backup`: a backup restores
//! to a database with every pair, a second backup lists beside the first, damage exits 5 (and
//! never reaches the database: backups hold copies), and misuse exits with the documented codes.

mod common;

use common::{arg, corrupt_byte, database_in_tables, run, run_expect, scratch};

#[test]
fn backups_list_verify_restore_and_delete() {
    let (dir, db) = scratch();
    database_in_tables(&db, 300);
    let database = arg(&db);
    let backups = arg(&dir.path().join("backups"));
    let first = run_expect(&["backup", &database, &backups], 0);
    assert!(first.stdout.starts_with("backup 1 written"), "{}", first.stdout);
    run_expect(&["put", &database, "after-the-first", "yes"], 0);
    run_expect(&["backup", &database, &backups], 0);
    let listed = run_expect(&["list-backups", &backups], 0);
    let ids: Vec<&str> = listed.lines().iter().map(|line| line.split('\t').next().unwrap()).collect();
    assert_eq!(ids, vec!["1", "2"]);
    run_expect(&["verify-backup", &backups, "2"], 0);
    let restored = arg(&dir.path().join("restored"));
    run_expect(&["restore", &backups, "1", &restored], 0);
    run_expect(&["get", &restored, "after-the-first"], 1);
    let original = run_expect(&["scan", &database], 0);
    let scanned = run_expect(&["scan", &restored], 0);
    assert_eq!(scanned.lines().len() + 1, original.lines().len(), "backup 1 has every pair but the later one");
    // An existing target, an unknown id, a missing backup directory.
    assert_eq!(run(&["restore", &backups, "1", &restored]).code, 7);
    assert_eq!(run(&["verify-backup", &backups, "9"]).code, 7);
    assert_eq!(run(&["list-backups", &arg(&dir.path().join("nothing"))]).code, 3);
    run_expect(&["delete-backup", &backups, "1"], 0);
    let listed = run_expect(&["list-backups", &backups], 0);
    assert_eq!(listed.lines().len(), 1);
    run_expect(&["verify-backup", &backups, "2"], 0);
}

#[test]
fn a_damaged_backup_fails_verification_with_exit_code_5_naming_the_file() {
    let (dir, db) = scratch();
    database_in_tables(&db, 300);
    let backups_dir = dir.path().join("backups");
    run_expect(&["backup", &arg(&db), &arg(&backups_dir)], 0);
    let shared = backups_dir.join("shared");
    let victim = std::fs::read_dir(&shared).unwrap().next().unwrap().unwrap().path();
    corrupt_byte(&victim, 100);
    let failed = run(&["verify-backup", &arg(&backups_dir), "1"]);
    assert_eq!(failed.code, 5);
    let name = victim.file_name().unwrap().to_string_lossy().to_string();
    assert!(failed.stderr.contains(&name), "{}", failed.stderr);
    // The backup holds copies, not links: the database's own tables are untouched.
    run_expect(&["verify", &arg(&db)], 0);
}
