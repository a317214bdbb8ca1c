//! `inspect wal|sst|manifest FILE`: one file's records, blocks, properties and checksums, for
//! a person to read.
//!
//! Every structure is decoded by the engine (`riptide::internals::inspect`); this module only
//! lays the reports out as text. Keys and values are printed in the chosen encoding (escaped by
//! default, `--hex`); internal keys as `KEY @ SEQUENCE put|delete`.
//!
//! Concurrency contract: reads one file, takes no lock; a log that a running database is
//! appending to may show a torn tail.
//!
//! Invariants: exit code 0 when the file is intact, 5 when any damage was found (each damaged
//! region is printed with its offsets and the engine's reason), 3 when the file does not exist.

use std::path::Path;

use riptide::internals::inspect::{
    decode_batch, inspect_table, parse_internal_key, scan_log, scan_manifest, DamagedRange, EditSummary, FileSummary,
};

use crate::cli::FileKindChoice;
use crate::escape::Style;
use crate::exit::{CliError, CliResult, Outcome};
use crate::output::Output;

/// Runs `riptide inspect KIND FILE`.
pub fn inspect(kind: FileKindChoice, file: &Path, entries: bool, style: Style) -> CliResult {
    if !file.is_file() {
        return Err(CliError::missing(format!("{}: no such file", file.display())));
    }
    let mut output = Output::stdout();
    let damaged = match kind {
        FileKindChoice::Wal => inspect_wal(file, entries, style, &mut output)?,
        FileKindChoice::Manifest => inspect_manifest(file, style, &mut output)?,
        FileKindChoice::Sst => inspect_sst(file, entries, style, &mut output)?,
    };
    output.finish()?;
    Ok(if damaged { Outcome::ProblemsFound } else { Outcome::Success })
}

/// An internal key as `KEY @ SEQUENCE KIND`, or a note that it does not decode.
pub fn internal_key_text(style: &Style, internal_key: &[u8]) -> String {
    match parse_internal_key(internal_key) {
        Some(parts) => format!("{} @ {} {}", style.encode(&parts.user_key), parts.sequence, parts.kind.name()),
        None => format!("(malformed internal key {})", style.encode(internal_key)),
    }
}

fn print_damage(output: &mut Output, damage: &[DamagedRange]) -> CliResult<()> {
    for range in damage {
        let what = if range.torn_tail { "torn tail" } else { "DAMAGED" };
        output.line(&format!(
            "  {what}: bytes {}..{} ({} bytes): {}",
            range.start,
            range.end,
            range.end - range.start,
            range.reason
        ))?;
    }
    Ok(())
}

fn inspect_wal(file: &Path, entries: bool, style: Style, output: &mut Output) -> CliResult<bool> {
    let scan = scan_log(file)?;
    output.line(&format!(
        "log {} ({} bytes, {} valid records)",
        file.display(),
        scan.file_size_bytes,
        scan.records.len()
    ))?;
    let mut damaged = scan.damage.iter().any(|range| !range.torn_tail);
    for record in &scan.records {
        let header = format!(
            "record at {}: {} payload bytes, checksum {:#010x} ok",
            record.offset,
            record.payload.len(),
            record.checksum
        );
        match decode_batch(&record.payload, file, record.payload_offset()) {
            Ok(batch) => {
                output.line(&format!("{header}, batch of {} at sequence {}", batch.records.len(), batch.sequence))?;
                if entries {
                    for entry in &batch.records {
                        let value = entry_value_text(&style, entry.kind, &entry.value);
                        output.line(&format!(
                            "    {} {} cf {} {}{value}",
                            entry.sequence,
                            entry.kind.name(),
                            entry.column_family_id,
                            style.encode(&entry.key)
                        ))?;
                    }
                }
            }
            Err(error) => {
                damaged = true;
                output.line(&format!("{header}, DAMAGED batch: {error}"))?;
            }
        }
    }
    print_damage(output, &scan.damage)?;
    if scan.preallocated_tail_bytes > 0 {
        output.line(&format!(
            "preallocated (unused) zeros: {} bytes at the end of the log",
            scan.preallocated_tail_bytes
        ))?;
    }
    Ok(damaged)
}

fn file_text(style: &Style, file: &FileSummary) -> String {
    format!(
        "table {} ({} bytes, {} entries, {} deletes, sequences {}..{}) [{} .. {}]",
        file.number,
        file.file_size_bytes,
        file.entries,
        file.deletions,
        file.smallest_sequence,
        file.largest_sequence,
        internal_key_text(style, &file.smallest),
        internal_key_text(style, &file.largest)
    )
}

fn edit_lines(style: &Style, edit: &EditSummary) -> Vec<String> {
    let mut lines = vec![format!("  column family {}", edit.column_family)];
    let mut field = |text: String| lines.push(format!("    {text}"));
    if let Some(name) = &edit.add_column_family {
        field(format!("add column family {name:?}"));
    }
    if edit.drop_column_family {
        field("drop column family".to_string());
    }
    if let Some(name) = &edit.rename_column_family {
        field(format!("rename column family to {name:?}"));
    }
    if let Some(name) = &edit.comparator {
        field(format!("comparator {name:?}"));
    }
    if let Some(name) = &edit.column_family_comparator {
        field(format!("column family comparator {name:?}"));
    }
    if let Some(id) = edit.max_column_family {
        field(format!("max column family {id}"));
    }
    if let Some(number) = edit.log_number {
        field(format!("log number {number}"));
    }
    if let Some(number) = edit.next_file_number {
        field(format!("next file number {number}"));
    }
    if let Some(sequence) = edit.last_sequence {
        field(format!("last sequence {sequence}"));
    }
    for (level, number) in &edit.deleted_files {
        field(format!("delete table {number} from level {level}"));
    }
    for (level, file) in &edit.new_files {
        field(format!("add to level {level}: {}", file_text(style, file)));
    }
    for number in &edit.prepared_committed {
        field(format!("commits prepared transaction {number}"));
    }
    lines
}

fn inspect_manifest(file: &Path, style: Style, output: &mut Output) -> CliResult<bool> {
    let scan = scan_manifest(file)?;
    output.line(&format!(
        "manifest {} ({} bytes, {} valid records)",
        file.display(),
        scan.file_size_bytes,
        scan.records.len()
    ))?;
    let mut damaged = scan.damage.iter().any(|range| !range.torn_tail);
    for record in &scan.records {
        let header = format!(
            "record at {}: {} payload bytes, checksum {:#010x} ok",
            record.offset, record.length, record.checksum
        );
        match &record.edits {
            Ok(edits) => {
                let kind = if edits.len() > 1 { format!(", group of {} edits", edits.len()) } else { String::new() };
                output.line(&format!("{header}{kind}"))?;
                for edit in edits {
                    for line in edit_lines(&style, edit) {
                        output.line(&line)?;
                    }
                }
            }
            Err(reason) => {
                damaged = true;
                output.line(&format!("{header}, DAMAGED edit: {reason}"))?;
            }
        }
    }
    print_damage(output, &scan.damage)?;
    Ok(damaged)
}

fn inspect_sst(file: &Path, entries: bool, style: Style, output: &mut Output) -> CliResult<bool> {
    let report = inspect_table(file, None, entries)?;
    output.line(&format!("table {} ({} bytes)", file.display(), report.file_size_bytes))?;
    if let Some(footer) = &report.footer {
        output.line(&format!(
            "footer at {}: format version {}, checksum {:#010x} ok",
            footer.offset, footer.format_version, footer.checksum
        ))?;
        output.line(&format!("  index block at {} ({} bytes)", footer.index.0, footer.index.1))?;
        match footer.filter {
            Some((offset, size)) => output.line(&format!("  filter block at {offset} ({size} bytes)"))?,
            None => output.line("  no filter block")?,
        }
        output.line(&format!("  properties block at {} ({} bytes)", footer.properties.0, footer.properties.1))?;
    }
    if let Some(properties) = &report.properties {
        output.line("properties:")?;
        let lines = [
            format!("entries {} ({} deletes)", properties.entries, properties.deletions),
            format!("raw key bytes {}, raw value bytes {}", properties.raw_key_bytes, properties.raw_value_bytes),
            format!("data blocks {} ({} bytes)", properties.data_blocks, properties.data_size_bytes),
            format!("index {} bytes, filter {} bytes", properties.index_size_bytes, properties.filter_size_bytes),
            format!("smallest key {}", internal_key_text(&style, &properties.smallest_key)),
            format!("largest key {}", internal_key_text(&style, &properties.largest_key)),
            format!("sequences {}..{}", properties.smallest_sequence, properties.largest_sequence),
            format!("compression {}", properties.compression),
            format!("comparator {}", properties.comparator),
            format!("format version {}", properties.format_version),
        ];
        for line in lines {
            output.line(&format!("  {line}"))?;
        }
    }
    if let Some(filter) = &report.filter {
        let state = if filter.valid { "ok" } else { "DAMAGED" };
        output.line(&format!(
            "filter at {} ({} bytes), checksum {:#010x} {state}",
            filter.offset, filter.size_bytes, filter.checksum
        ))?;
    }
    if let Some(count) = report.index_entries {
        output.line(&format!("index: {count} entries"))?;
    }
    for block in &report.blocks {
        let checksum = if block.stored_checksum == block.computed_checksum {
            format!("checksum {:#010x} ok", block.stored_checksum)
        } else {
            format!(
                "checksum stored {:#010x} computed {:#010x} MISMATCH",
                block.stored_checksum, block.computed_checksum
            )
        };
        let mut line = format!(
            "data block at {} ({} bytes, {}, {} uncompressed), {checksum}",
            block.offset, block.size_bytes, block.compression, block.uncompressed_bytes
        );
        match (&block.error, &block.first_key, &block.last_key) {
            (Some(error), _, _) => line.push_str(&format!(", DAMAGED: {error}")),
            (None, Some(first), Some(last)) => line.push_str(&format!(
                ", {} entries [{} .. {}]",
                block.entries,
                internal_key_text(&style, first),
                internal_key_text(&style, last)
            )),
            _ => {}
        }
        output.line(&line)?;
        if entries {
            for entry in report.entries.iter().filter(|entry| entry.block_offset == block.offset) {
                let value = entry_value_text(&style, entry.key.kind, &entry.value);
                output.line(&format!(
                    "    {} @ {} {}{value}",
                    style.encode(&entry.key.user_key),
                    entry.key.sequence,
                    entry.key.kind.name()
                ))?;
            }
        }
    }
    print_damage(output, &report.damage)?;
    Ok(!report.damage.is_empty())
}

/// What `inspect` prints after an entry's key: the value of a put (with its expiry, for a put
/// with one), the reference of a blob index, a merge operand, the end of a range delete;
/// nothing for a delete.
fn entry_value_text(style: &Style, kind: riptide::internals::inspect::EntryKind, value: &[u8]) -> String {
    use riptide::internals::inspect::EntryKind;
    match kind {
        EntryKind::Put => format!(" = {}", style.encode(value)),
        EntryKind::PutWithExpiry => match value.split_first_chunk::<8>() {
            Some((expiry, rest)) => {
                format!(" = {} (expires at {} us)", style.encode(rest), u64::from_le_bytes(*expiry))
            }
            None => format!(" = {} (malformed expiry)", style.encode(value)),
        },
        EntryKind::BlobIndex => format!(" -> blob reference {}", style.encode(value)),
        EntryKind::Merge => format!(" merge {}", style.encode(value)),
        EntryKind::DeleteRange => format!(" .. {}", style.encode(value)),
        _ => String::new(),
    }
}
