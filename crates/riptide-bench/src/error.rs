//! The benchtool's error type: a message with the chain of contexts that led to it.
//!
//! Every fallible step (opening an engine, reading `/proc`, writing a CSV file, spawning a
//! child run) returns [`Result`]; callers add context with [`Context::context`] so that the
//! message printed by the CLI says what was being done, not only what the system call said.

use std::fmt;

/// An error with a human-readable message (contexts are prepended, outermost first).
#[derive(Debug)]
pub struct BenchError {
    message: String,
}

/// The result type used throughout the benchtool.
pub type Result<T> = std::result::Result<T, BenchError>;

impl BenchError {
    /// An error with the given message.
    pub fn new(message: impl Into<String>) -> BenchError {
        BenchError { message: message.into() }
    }

    /// The full message, contexts included.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for BenchError {}

impl From<std::io::Error> for BenchError {
    fn from(error: std::io::Error) -> BenchError {
        BenchError::new(error.to_string())
    }
}

impl From<riptide::Error> for BenchError {
    fn from(error: riptide::Error) -> BenchError {
        BenchError::new(format!("riptide: {error}"))
    }
}

/// Adds a description of the step that failed to any displayable error.
pub trait Context<T> {
    /// Wraps the error as `"{context}: {error}"`.
    fn context(self, context: impl fmt::Display) -> Result<T>;

    /// Like [`Context::context`], with the description computed only on failure.
    fn with_context<F, C>(self, context: F) -> Result<T>
    where
        F: FnOnce() -> C,
        C: fmt::Display;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|error| BenchError::new(format!("{context}: {error}")))
    }

    fn with_context<F, C>(self, context: F) -> Result<T>
    where
        F: FnOnce() -> C,
        C: fmt::Display,
    {
        self.map_err(|error| BenchError::new(format!("{}: {error}", context())))
    }
}

/// Returns early with a [`BenchError`] built from a format string.
#[macro_export]
macro_rules! bail {
    ($($argument:tt)*) => {
        return Err($crate::error::BenchError::new(format!($($argument)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_is_prepended() {
        let failed: std::result::Result<(), String> = Err("disk full".to_string());
        let error = failed.context("writing results.csv").unwrap_err();
        assert_eq!(error.message(), "writing results.csv: disk full");
    }
}
