//! Error cases of every command: a missing directory or database (exit code 3), a database
//! locked by another process (4), a corrupt file (5), bad arguments (2); each with a clear
//! message on stderr and never a panic (checked by `common::run` on every run).

mod common;

use common::{arg, corrupt_byte, database_in_tables, run, run_expect, scratch};

/// Every command that takes a database directory, with the arguments it needs after it.
fn commands_on(db: &str, dump: &str) -> Vec<Vec<String>> {
    let commands: Vec<Vec<&str>> = vec![
        vec!["get", db, "k"],
        vec!["put", db, "k", "v"],
        vec!["delete", db, "k"],
        vec!["scan", db],
        vec!["list-cf", db],
        vec!["create-cf", db, "new"],
        vec!["drop-cf", db, "default"],
        vec!["stats", db],
        vec!["compact", db],
        vec!["dump", db, "-o", dump],
        vec!["load", db, dump],
        vec!["verify", db],
    ];
    commands.into_iter().map(|command| command.into_iter().map(str::to_string).collect()).collect()
}

#[test]
fn a_missing_directory_exits_3_and_creates_nothing() {
    let (dir, db) = scratch();
    let dump = dir.path().join("x.dump");
    std::fs::write(&dump, b"").expect("write");
    for command in commands_on(&arg(&db), &arg(&dump)) {
        let result = run(&command);
        assert_eq!(result.code, 3, "{command:?}: {}", result.stderr);
        assert!(result.stderr.starts_with("riptide: error: "), "{command:?}: {}", result.stderr);
        assert!(!db.exists(), "{command:?} created the directory");
    }
}

#[test]
fn a_directory_without_a_database_exits_3() {
    let (dir, _db) = scratch();
    let result = run_expect(&["get", &arg(dir.path()), "k"], 3);
    assert!(result.stderr.contains("no database here"), "{}", result.stderr);
    assert!(!dir.path().join("CURRENT").exists());
}

#[test]
fn a_locked_database_exits_4_for_every_command() {
    let (dir, db) = scratch();
    database_in_tables(&db, 10);
    let dump = dir.path().join("x.dump");
    run_expect(&["dump", &arg(&db), "-o", &arg(&dump)], 0);
    let holder = riptide::Db::open(&db, riptide::Options::default()).expect("open");
    let mut commands = commands_on(&arg(&db), &arg(&dump));
    commands.push(vec!["repair".to_string(), arg(&db)]);
    for command in commands {
        let result = run(&command);
        assert_eq!(result.code, 4, "{command:?}: {}", result.stderr);
        assert!(result.stderr.contains("locked"), "{command:?}: {}", result.stderr);
    }
    holder.close().expect("close");
    run_expect(&["get", &arg(&db), "key000001x"], 0);
}

#[test]
fn a_corrupt_file_exits_5_with_the_file_named() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 10);
    let current = db.join("CURRENT");
    corrupt_byte(&current, 0);
    for command in [vec!["get", &arg(&db), "k"], vec!["scan", &arg(&db)], vec!["stats", &arg(&db)]] {
        let result = run_expect(&command, 5);
        assert!(result.stderr.contains(&format!("corruption in {}", current.display())), "{}", result.stderr);
        assert!(result.stderr.contains("riptide verify"), "the message points at verify: {}", result.stderr);
    }
}

#[test]
fn bad_arguments_exit_2() {
    let (_dir, db) = scratch();
    database_in_tables(&db, 10);
    let db = arg(&db);
    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["no-such-command"],
        vec!["get", &db],
        vec!["get", &db, "k", "--no-such-flag"],
        vec!["get", &db, "bad\\escape"],
        vec!["get", &db, "trailing\\"],
        vec!["--hex", "get", &db, "xyz"],
        vec!["--hex", "get", &db, "abc"],
        vec!["scan", &db, "--limit", "many"],
        vec!["inspect", "table", &db],
        vec!["create-cf", &db, "x", "--comparator", "sideways"],
    ];
    for command in cases {
        let result = run(&command);
        assert_eq!(result.code, 2, "{command:?}: {}", result.stderr);
        assert!(!result.stderr.is_empty(), "{command:?} says why");
    }
}

#[test]
fn help_documents_the_exit_codes() {
    let help = run_expect(&["--help"], 0);
    for line in ["Exit codes:", "1  get: the key has no value", "4  the database is locked"] {
        assert!(help.stdout.contains(line), "{}", help.stdout);
    }
}
