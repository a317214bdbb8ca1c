//! The short, fixed-seed SIGKILL loop run by `make test`: a few hundred cycles of running the
//! stress driver as a child process, killing it at a random moment, and verifying the reopened
//! database against the child's journal. `RIPTIDE_CRASH_CYCLES` changes the number of cycles;
//! `make soak` runs the same loop for longer through the `riptide-stress crash` command.

use std::path::PathBuf;

use riptide_stress::crash::{self, CrashConfig};
use riptide_stress::model::KeySpace;

#[test]
fn kill_nine_cycles_lose_no_acknowledged_write() {
    let cycles = std::env::var("RIPTIDE_CRASH_CYCLES").ok().and_then(|value| value.parse().ok()).unwrap_or(250);
    let config = CrashConfig {
        executable: PathBuf::from(env!("CARGO_BIN_EXE_riptide-stress")),
        seed: 20_240_601,
        cycles: Some(cycles),
        duration: None,
        threads: 4,
        max_run_ms: 300,
        path: None,
        space: KeySpace::default(),
    };
    let report = crash::run(&config);
    println!(
        "crash loop: {} cycles, {} acknowledged writes, {} in flight at a kill, {} kills during open",
        report.cycles, report.acknowledged_writes, report.writes_in_flight_at_kill, report.kills_during_open
    );
    assert!(
        report.failures.is_empty(),
        "failures (database kept at {:?}):\n{}",
        report.kept_path,
        report.failures.join("\n")
    );
    assert_eq!(report.cycles, cycles);
    assert!(report.acknowledged_writes > cycles * 10, "the children wrote too little: {report:?}");
    assert!(report.writes_in_flight_at_kill > 0, "no kill landed while a write was in flight: {report:?}");
}
