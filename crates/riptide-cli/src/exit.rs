//! The tool's error type and its exit codes.
//!
//! Every command returns `Result<Outcome, CliError>`; `main` turns the result into a process exit
//! code and prints the error's message on stderr. Nothing here panics, so a damaged database,
//! a locked directory or a bad argument always ends with a message and a documented code.
//!
//! Concurrency contract: plain values, built and consumed on the main thread.
//!
//! Invariants: the codes below are part of the tool's interface (documented in `riptide
//! --help` and in the README); a code is never reused for another meaning.

use std::fmt;
use std::process::ExitCode;

/// The command did what was asked.
pub const SUCCESS: u8 = 0;
/// `get` found no value for the key (as `grep` exits 1 when nothing matched).
pub const NOT_FOUND: u8 = 1;
/// The arguments were malformed (also what `clap` uses for usage errors).
pub const USAGE: u8 = 2;
/// The directory, the database in it, a column family or an input file does not exist.
pub const MISSING: u8 = 3;
/// Another process (or handle) holds the database's lock.
pub const LOCKED: u8 = 4;
/// Damaged data: a corrupt file met while working, problems found by `verify`, a dump whose
/// checksum does not match, or data `repair` could not salvage.
pub const CORRUPTION: u8 = 5;
/// The operating system reported an I/O failure.
pub const IO: u8 = 6;
/// Any other failure reported by the engine (a key over the size limit, an unsupported
/// comparator, a background error, ...).
pub const OTHER: u8 = 7;

/// The help text's paragraph on exit codes, shared by `--help` and kept in step with the
/// constants above.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  get: the key has no value (like grep when nothing matches)
  2  bad arguments (unknown option, malformed escape or hex, missing value)
  3  missing: no such directory, no database in it, no such column family or file
  4  the database is locked by another process
  5  corruption: a damaged file, problems found by verify, a dump with a bad checksum
  6  I/O error
  7  any other error reported by the engine";

/// How a successful command wants the process to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit code 0.
    Success,
    /// `get` found nothing: exit code 1, nothing on stdout.
    NotFound,
    /// The command ran to its end but found damage (`verify`): exit code 5.
    ProblemsFound,
}

impl Outcome {
    /// The exit code of this outcome.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            Outcome::Success => SUCCESS,
            Outcome::NotFound => NOT_FOUND,
            Outcome::ProblemsFound => CORRUPTION,
        })
    }
}

/// A failure, with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    /// The process exit code.
    pub code: u8,
    /// The message printed after `riptide: error: `.
    pub message: String,
}

impl CliError {
    /// A malformed argument.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError { code: USAGE, message: message.into() }
    }

    /// Something named on the command line does not exist.
    pub fn missing(message: impl Into<String>) -> CliError {
        CliError { code: MISSING, message: message.into() }
    }

    /// Damaged data.
    pub fn corruption(message: impl Into<String>) -> CliError {
        CliError { code: CORRUPTION, message: message.into() }
    }

    /// An I/O failure outside the engine (output, dump files, moving files aside).
    pub fn io(context: impl fmt::Display, error: std::io::Error) -> CliError {
        if error.kind() == std::io::ErrorKind::NotFound {
            return CliError::missing(format!("{context}: {error}"));
        }
        CliError { code: IO, message: format!("{context}: {error}") }
    }

    /// The reader of standard output went away (a closed pipe): stop, print nothing, exit 0.
    pub fn quiet_stop() -> CliError {
        CliError { code: SUCCESS, message: String::new() }
    }

    /// Any other failure.
    pub fn other(message: impl Into<String>) -> CliError {
        CliError { code: OTHER, message: message.into() }
    }
}

impl From<riptide::Error> for CliError {
    fn from(error: riptide::Error) -> CliError {
        let code = match &error {
            riptide::Error::Corruption { .. } => CORRUPTION,
            riptide::Error::Busy(_) => LOCKED,
            riptide::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => MISSING,
            riptide::Error::Io { .. } => IO,
            _ => OTHER,
        };
        let hint = match code {
            LOCKED => " (close the other process that has it open, then retry)",
            CORRUPTION => " (run `riptide verify` for a full report, `riptide repair` to salvage)",
            _ => "",
        };
        CliError { code, message: format!("{error}{hint}") }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

/// The result type of every command.
pub type CliResult<T = Outcome> = Result<T, CliError>;
