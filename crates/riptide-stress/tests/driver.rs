//! The stress driver in-process: a few seconds of many threads on the real file system, with
//! every operation kind, checked against the expected state; and a recorded history that parses.

use std::time::Duration;

use riptide_stress::driver::{self, DriverConfig};
use riptide_stress::journal::{parse_line, Event, Journal};
use riptide_stress::model::KeySpace;

fn config(path: std::path::PathBuf, seed: u64, milliseconds: u64) -> DriverConfig {
    DriverConfig {
        path,
        seed,
        cycle: 1,
        threads: 4,
        duration: Some(Duration::from_millis(milliseconds)),
        until_every_operation_ran: true,
        space: KeySpace::default(),
        weights: String::new(),
        hang_seconds: 120,
    }
}

#[test]
fn threads_running_every_operation_agree_with_the_expected_state() {
    for seed in [1, 2, 3] {
        let directory = tempfile::tempdir().expect("tempdir");
        let report = driver::run(&config(directory.path().join("db"), seed, 2500), Journal::new(None, false))
            .expect("the driver starts");
        assert!(report.failure.is_none(), "seed {seed}: {:?}", report.failure);
        for (name, count) in &report.operations {
            assert!(*count > 0, "seed {seed}: operation {name} never ran: {:?}", report.operations);
        }
    }
}

#[test]
fn a_recorded_history_parses_and_names_every_write() {
    let directory = tempfile::tempdir().expect("tempdir");
    let history = directory.path().join("history.txt");
    let file = std::fs::File::create(&history).expect("history file");
    let report = driver::run(&config(directory.path().join("db"), 9, 800), Journal::new(Some(Box::new(file)), true))
        .expect("the driver starts");
    assert!(report.failure.is_none(), "{:?}", report.failure);
    let text = std::fs::read_to_string(&history).expect("read history");
    let events: Vec<Event> =
        text.lines().map(|line| parse_line(line).unwrap_or_else(|| panic!("bad line {line:?}"))).collect();
    assert_eq!(events.first(), Some(&Event::Ready));
    assert_eq!(events.last(), Some(&Event::Finished));
    let begins = events.iter().filter(|event| matches!(event, Event::Begin { .. })).count();
    let ends = events.iter().filter(|event| matches!(event, Event::End { acknowledged: true, .. })).count();
    assert_eq!(begins, ends, "every write of a clean run is acknowledged");
    assert!(events.contains(&Event::Read), "reads were recorded");
}

/// A driver killed between the two renames of `rename-family` leaves the family under its
/// temporary name. The next open creates an empty family under the real name (every family of
/// the key space is opened by name); the repair must drop that one and give the moved family its
/// name back, keys and all, and a kill in the middle of the repair must be repaired again.
#[test]
fn a_family_left_under_its_temporary_name_gets_its_name_and_keys_back_at_open() {
    use riptide_stress::model::value_bytes;
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("db");
    let space = KeySpace { plain_keys: 8, groups: 0, group_size: 1, column_families: 3 };
    let options = driver::options_for_seed(5);
    let family = 2;
    let name = KeySpace::family_name(family).expect("a named family");
    let index = space.plain_key(family, 3);
    {
        let db = driver::open_database(&path, options.clone(), space).expect("open");
        let handle = db.column_family(&name).expect("family");
        db.put_cf(&handle, &space.key(index), &value_bytes(index, 77)).expect("put");
        db.rename_column_family(&handle, &KeySpace::temporary_family_name(&name)).expect("rename");
        db.close().expect("close");
    }
    // A kill right after the open, before the repair: the empty family under the name is
    // durable, beside the moved one.
    {
        let families = vec![(name.clone(), options.column_family_options())];
        let db = riptide::Db::open_with_column_families(&path, options.clone(), families).expect("plain open");
        assert!(db.column_family(&name).is_some(), "{:?}", db.list_column_families());
        assert!(db.column_family(&KeySpace::temporary_family_name(&name)).is_some());
        db.close().expect("close");
    }
    for attempt in 0..2 {
        let db = driver::open_database(&path, options.clone(), space).expect("open with repair");
        assert!(
            db.column_family(&KeySpace::temporary_family_name(&name)).is_none(),
            "attempt {attempt}: {:?}",
            db.list_column_families()
        );
        let values = driver::read_all(&db, space).expect("read all");
        assert_eq!(values[index], Some(77), "attempt {attempt}: the moved family's key");
        assert_eq!(values.iter().filter(|value| value.is_some()).count(), 1, "attempt {attempt}");
        db.close().expect("close");
    }
}
