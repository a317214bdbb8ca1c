//! `verify DIR`: checks every live file of a database and reports each problem with its file
//! and offset.
//!
//! What is checked, all through the engine's decoders (`riptide::internals::inspect`):
//! - `CURRENT` names a manifest that exists; every manifest record's checksum and decoding;
//!   the replay of its edits; and the engine's own recovery of it (`VersionSet::recover`,
//!   which checks file numbers, key ranges and that levels from 1 down do not overlap);
//! - every table the manifest names: present, of the recorded size, every block's checksum
//!   and decoding, keys in strictly increasing order within and across blocks, properties and
//!   manifest metadata agreeing with the data; tables of each level from 1 down in order and
//!   not overlapping, by their actual keys;
//! - every live log (numbered at or above the smallest log number of any column family):
//!   every record's checksum and batch.
//!
//! Problems are errors (data is lost or wrong: exit code 5) or warnings (what a crash
//! legitimately leaves and the next open cleans up: a torn log tail, a table the manifest does
//! not name, an old log or manifest). Warnings count only with `--strict`.
//!
//! Concurrency contract: the database's lock is held for the whole check, so no process
//! changes the files meanwhile (a database open elsewhere is refused with exit code 4).
//!
//! Invariants: nothing is written; every problem names a file.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use riptide::fs::{FileSystem, OsFileSystem};
use riptide::internals::inspect::{
    builtin_comparator, check_recovery, classify_file_name, decode_batch, inspect_table, log_file_name,
    parse_internal_key, replay_manifest, scan_log, table_file_name, DbFileKind, ManifestState,
};
use riptide::Comparator;

use crate::exit::{CliError, CliResult, Outcome};
use crate::open::require_database;
use crate::output::Output;

/// How bad a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Severity {
    Error,
    Warning,
}

/// One problem found.
#[derive(Clone, Debug)]
struct Problem {
    severity: Severity,
    file: PathBuf,
    offset: Option<u64>,
    message: String,
}

/// What was checked and found.
#[derive(Default)]
struct Findings {
    problems: Vec<Problem>,
    tables: usize,
    blocks: usize,
    logs: usize,
    log_records: usize,
    manifest_records: usize,
}

impl Findings {
    fn add(&mut self, severity: Severity, file: &Path, offset: Option<u64>, message: impl Into<String>) {
        self.problems.push(Problem { severity, file: file.to_path_buf(), offset, message: message.into() });
    }

    fn add_engine_error(&mut self, error: riptide::Error, fallback_file: &Path) {
        match error {
            riptide::Error::Corruption { file, offset, reason } => {
                self.add(Severity::Error, &file, Some(offset), reason)
            }
            other => self.add(Severity::Error, fallback_file, None, other.to_string()),
        }
    }
}

/// Runs `riptide verify DIR`.
pub fn verify(dir: &Path, strict: bool) -> CliResult {
    require_database(dir)?;
    let _lock = OsFileSystem.lock(&dir.join("LOCK"))?;
    let findings = check_database(dir)?;
    let mut output = Output::stdout();
    for problem in &findings.problems {
        let severity = match problem.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let location = match problem.offset {
            Some(offset) => format!("{} at offset {offset}", problem.file.display()),
            None => problem.file.display().to_string(),
        };
        output.line(&format!("{severity}: {location}: {}", problem.message))?;
    }
    let errors = findings.problems.iter().filter(|problem| problem.severity == Severity::Error).count();
    let warnings = findings.problems.len() - errors;
    output.line(&format!(
        "checked the manifest ({} records), {} tables ({} data blocks), {} logs ({} records): {errors} errors, {warnings} warnings",
        findings.manifest_records, findings.tables, findings.blocks, findings.logs, findings.log_records
    ))?;
    output.finish()?;
    Ok(if errors > 0 || (strict && warnings > 0) { Outcome::ProblemsFound } else { Outcome::Success })
}

fn check_database(dir: &Path) -> CliResult<Findings> {
    let mut findings = Findings::default();
    let state = match replay_manifest(dir) {
        Ok(state) => state,
        Err(error) => {
            findings.add_engine_error(error, &dir.join("CURRENT"));
            return Ok(findings);
        }
    };
    findings.manifest_records = state.records;
    check_manifest(dir, &state, &mut findings);
    check_tables(dir, &state, &mut findings);
    check_blob_files(dir, &state, &mut findings);
    check_logs(dir, &state, &mut findings);
    check_directory(dir, &state, &mut findings)?;
    Ok(findings)
}

fn check_manifest(dir: &Path, state: &ManifestState, findings: &mut Findings) {
    let before = findings.problems.len();
    for range in &state.damage {
        let severity = if range.torn_tail { Severity::Warning } else { Severity::Error };
        let what = if range.torn_tail { "torn tail (an edit that never took effect)" } else { "damaged records" };
        findings.add(
            severity,
            &range.file,
            Some(range.start),
            format!("{what}, {} bytes: {}", range.end - range.start, range.reason),
        );
    }
    for (offset, problem) in &state.problems {
        findings.add(Severity::Error, &state.path, Some(*offset), problem.clone());
    }
    let errors_before = findings.problems[before..].iter().any(|problem| problem.severity == Severity::Error);
    // The engine's strict recovery has the final word; its first complaint is worth reporting
    // only when the replay above found nothing, since it stops at the first problem.
    if !errors_before {
        if let Err(error) = check_recovery(dir, state) {
            findings.add_engine_error(error, &state.path);
        }
    }
}

fn comparator_of(name: &str) -> Option<Arc<dyn Comparator>> {
    builtin_comparator(name)
}

/// A table's actual user-key range, from its properties.
struct TableRange {
    number: u64,
    path: PathBuf,
    smallest: Vec<u8>,
    largest: Vec<u8>,
}

fn check_tables(dir: &Path, state: &ManifestState, findings: &mut Findings) {
    for family in &state.column_families {
        let comparator = comparator_of(&family.comparator);
        if comparator.is_none() {
            findings.add(
                Severity::Warning,
                &state.path,
                None,
                format!(
                    "column family {:?}: comparator {:?} is unknown to this tool; key order not checked",
                    family.name, family.comparator
                ),
            );
        }
        let mut levels: Vec<Vec<TableRange>> = Vec::new();
        for live in &family.files {
            let path = dir.join(table_file_name(live.file.number));
            let Ok(metadata) = std::fs::metadata(&path) else {
                findings.add(
                    Severity::Error,
                    &path,
                    None,
                    format!(
                        "missing: the manifest lists it in level {} of column family {:?}",
                        live.level, family.name
                    ),
                );
                continue;
            };
            findings.tables += 1;
            if metadata.len() != live.file.file_size_bytes {
                findings.add(
                    Severity::Error,
                    &path,
                    None,
                    format!("{} bytes, the manifest records {}", metadata.len(), live.file.file_size_bytes),
                );
            }
            let report = match inspect_table(&path, Some(&family.comparator), false) {
                Ok(report) => report,
                Err(error) => {
                    findings.add_engine_error(error, &path);
                    continue;
                }
            };
            findings.blocks += report.blocks.len();
            for range in &report.damage {
                findings.add(
                    Severity::Error,
                    &path,
                    Some(range.start),
                    format!("{} (bytes {}..{})", range.reason, range.start, range.end),
                );
            }
            let Some(properties) = &report.properties else {
                continue;
            };
            if properties.smallest_key != live.file.smallest || properties.largest_key != live.file.largest {
                findings.add(Severity::Error, &path, None, "its key range differs from the one the manifest records");
            }
            if properties.entries != live.file.entries || properties.deletions != live.file.deletions {
                findings.add(
                    Severity::Error,
                    &path,
                    None,
                    format!(
                        "{} entries ({} deletes), the manifest records {} ({})",
                        properties.entries, properties.deletions, live.file.entries, live.file.deletions
                    ),
                );
            }
            let (Some(smallest), Some(largest)) =
                (parse_internal_key(&properties.smallest_key), parse_internal_key(&properties.largest_key))
            else {
                continue;
            };
            let level = live.level as usize;
            if levels.len() <= level {
                levels.resize_with(level + 1, Vec::new);
            }
            levels[level].push(TableRange {
                number: live.file.number,
                path,
                smallest: smallest.user_key,
                largest: largest.user_key,
            });
        }
        let Some(comparator) = comparator else {
            continue;
        };
        for (level, tables) in levels.iter_mut().enumerate().skip(1) {
            tables.sort_by(|a, b| comparator.compare(&a.smallest, &b.smallest));
            for pair in tables.windows(2) {
                if comparator.compare(&pair[0].largest, &pair[1].smallest) != Ordering::Less {
                    findings.add(
                        Severity::Error,
                        &pair[1].path,
                        None,
                        format!(
                            "level {level} of column family {:?}: its keys overlap those of table {} (levels from 1 down must be sorted and disjoint)",
                            family.name, pair[0].number
                        ),
                    );
                }
            }
        }
    }
}

fn check_logs(dir: &Path, state: &ManifestState, findings: &mut Findings) {
    let min_log_number = state.min_log_number();
    let Ok(names) = list(dir) else {
        return;
    };
    let mut logs: Vec<u64> = names
        .iter()
        .filter_map(|name| match classify_file_name(name) {
            Some(DbFileKind::Log(number)) if number >= min_log_number => Some(number),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    for number in logs {
        let path = dir.join(log_file_name(number));
        findings.logs += 1;
        let scan = match scan_log(&path) {
            Ok(scan) => scan,
            Err(error) => {
                findings.add_engine_error(error, &path);
                continue;
            }
        };
        findings.log_records += scan.records.len();
        for record in &scan.records {
            if let Err(error) = decode_batch(&record.payload, &path, record.payload_offset()) {
                findings.add_engine_error(error, &path);
            }
        }
        for range in &scan.damage {
            let (severity, what) = if range.torn_tail {
                (Severity::Warning, "torn tail (an unfinished write; the next open drops it)")
            } else {
                (Severity::Error, "damaged records in the middle of the log")
            };
            findings.add(
                severity,
                &path,
                Some(range.start),
                format!("{what}, {} bytes: {}", range.end - range.start, range.reason),
            );
        }
    }
}

/// Files in the directory that the manifest does not account for.
/// The blob files the live tables reference (key-value separation).
fn referenced_blob_files(state: &ManifestState) -> std::collections::BTreeSet<u64> {
    state
        .column_families
        .iter()
        .flat_map(|family| family.files.iter().flat_map(|live| live.file.blob_references.iter().copied()))
        .collect()
}

/// Every blob file a live table references exists and decodes whole: header, every record's
/// checksum, footer (the engine checks each value again when it reads it).
fn check_blob_files(dir: &Path, state: &ManifestState, findings: &mut Findings) {
    for number in referenced_blob_files(state) {
        let path = dir.join(riptide::internals::inspect::blob_file_name(number));
        let data = match std::fs::read(&path) {
            Ok(data) => data,
            Err(_) => {
                findings.add(Severity::Error, &path, None, "missing: a live table references it".to_string());
                continue;
            }
        };
        if let Err(error) = riptide::internals::decode::blob_file(&data) {
            match error {
                riptide::Error::Corruption { offset, reason, .. } => {
                    findings.add(Severity::Error, &path, Some(offset), reason);
                }
                other => findings.add(Severity::Error, &path, None, other.to_string()),
            }
        }
    }
}

fn check_directory(dir: &Path, state: &ManifestState, findings: &mut Findings) -> CliResult<()> {
    let names = list(dir)?;
    let live_blob_files = referenced_blob_files(state);
    let live_tables: std::collections::HashSet<u64> =
        state.column_families.iter().flat_map(|family| family.files.iter().map(|live| live.file.number)).collect();
    let current_manifest = state.path.file_name().map(|name| name.to_string_lossy().to_string());
    for name in &names {
        let path = dir.join(name);
        let message = match classify_file_name(name) {
            Some(DbFileKind::Table(number)) if !live_tables.contains(&number) => {
                "a table the manifest does not name (left by an interrupted flush or compaction; the next open deletes it)"
            }
            Some(DbFileKind::Log(number)) if number < state.min_log_number() => {
                "an old log whose data is in tables (the next open deletes it)"
            }
            Some(DbFileKind::Manifest(_)) if current_manifest.as_deref() != Some(name.as_str()) => {
                "a manifest other than the one CURRENT names (the next open deletes it)"
            }
            Some(DbFileKind::Temp(_)) | Some(DbFileKind::Spill(_)) => "a temporary file (the next open deletes it)",
            Some(DbFileKind::Blob(number)) if !live_blob_files.contains(&number) => {
                "a blob file no live table references (the next open deletes it)"
            }
            _ => continue,
        };
        findings.add(Severity::Warning, &path, None, format!("extra file: {message}"));
    }
    Ok(())
}

fn list(dir: &Path) -> CliResult<Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|error| CliError::io(dir.display(), error))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|error| CliError::io(dir.display(), error))?;
        names.push(entry.file_name().to_string_lossy().to_string());
    }
    names.sort();
    Ok(names)
}
