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
