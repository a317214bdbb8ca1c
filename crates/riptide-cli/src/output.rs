//! Standard output for records: buffered, and quiet when the reader goes away.
//!
//! `riptide scan DB | head` closes the pipe early; the tool then stops at once and exits 0, as
//! `cat` does, instead of reporting a broken pipe.
//!
//! Concurrency contract: one `Output` per process, used by the main thread.
//!
//! Invariants: every line ends with `\n`; everything written is flushed by `finish`.

use std::io::{BufWriter, ErrorKind, Stdout, Write};

use crate::exit::{CliError, CliResult};

/// Buffered standard output.
pub struct Output {
    writer: BufWriter<Stdout>,
}

impl Output {
    /// Standard output, buffered.
    pub fn stdout() -> Output {
        Output { writer: BufWriter::new(std::io::stdout()) }
    }

    /// Writes one line.
    pub fn line(&mut self, text: &str) -> CliResult<()> {
        let result = self.writer.write_all(text.as_bytes()).and_then(|()| self.writer.write_all(b"\n"));
        result.map_err(output_error)
    }

    /// Flushes what is buffered.
    pub fn finish(mut self) -> CliResult<()> {
        self.writer.flush().map_err(output_error)
    }
}

/// A failed write to standard output; a closed pipe is a quiet success.
fn output_error(error: std::io::Error) -> CliError {
    if error.kind() == ErrorKind::BrokenPipe {
        CliError::quiet_stop()
    } else {
        CliError::io("write to standard output", error)
    }
}
