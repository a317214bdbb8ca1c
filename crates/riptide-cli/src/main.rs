//! `riptide`: the command-line tool of the Riptide storage engine.
//!
//! It reads and writes keys (`get`, `put`, `delete`, `scan`), manages column families and
//! compactions, exports and imports column families (`dump`, `load`), and looks after damaged
//! databases (`inspect`, `verify`, `repair`). The exit codes are listed in `exit.rs` and in
//! `riptide --help`.
//!
//! Concurrency contract: single-threaded; the engine's own background threads run while a
//! database is open. A database open in another process is refused (exit code 4), never
//! waited for.
//!
//! Invariants: the process never panics on bad input or damaged files; every failure prints
//! one `riptide: error: ...` line on stderr and exits with its documented code.

mod cli;
mod commands;
mod dump_format;
mod escape;
mod exit;
mod open;
mod output;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // clap prints help and version on stdout with exit code 0, usage errors on stderr
            // with exit code 2, which is the tool's code for bad arguments too.
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { exit::USAGE } else { exit::SUCCESS });
        }
    };
    match commands::run(cli) {
        Ok(outcome) => outcome.exit_code(),
        Err(error) => {
            if !error.message.is_empty() {
                eprintln!("riptide: error: {}", error.message);
            }
            ExitCode::from(error.code)
        }
    }
}
