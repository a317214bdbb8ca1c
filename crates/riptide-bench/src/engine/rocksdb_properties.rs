//! Write stall figures read from RocksDB's text properties.
//!
//! The `rocksdb` crate hands properties over as text only, so the stall time and the stall
//! counts are parsed from the lines RocksDB prints. The parsers are compiled without the
//! `rocksdb` feature so that the unit tests, which never build RocksDB, check them against
//! RocksDB's exact formats (`db/internal_stats.cc` of RocksDB 11.8.1).

/// The property whose `Cumulative stall:` line holds the total time writers waited. It reads
/// the counter that RocksDB's `rocksdb.stall.micros` statistic also adds to, without turning
/// statistics on (which would change the engine under test).
pub const DB_STATS_PROPERTY: &str = "rocksdb.dbstats";

/// The property that counts the default column family's delayed and stopped conditions.
pub const CF_WRITE_STALL_PROPERTY: &str = "rocksdb.cf-write-stall-stats";

/// The total write stall time in the text of `rocksdb.dbstats`, in microseconds.
///
/// RocksDB prints it as `Cumulative stall: 00:01:2.345 H:M:S, 1.2 percent`: hours, minutes,
/// and seconds with millisecond precision (`%05.3f`, so one digit before the point below 10). Returns `None` when the line is missing or has
/// another shape, so that a format change shows as a missing figure rather than a wrong one.
pub fn parse_cumulative_stall_micros(text: &str) -> Option<u64> {
    let rest = text.lines().find_map(|line| line.trim().strip_prefix("Cumulative stall:"))?;
    let mut words = rest.split_whitespace();
    let clock = words.next()?;
    if words.next()?.trim_end_matches(',') != "H:M:S" {
        return None;
    }
    let mut parts = clock.split(':');
    let hours: u64 = parts.next()?.parse().ok()?;
    let minutes: u64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || minutes >= 60 || !(0.0..60.0).contains(&seconds) {
        return None;
    }
    let whole_minutes_micros = (hours.checked_mul(60)?.checked_add(minutes)?).checked_mul(60_000_000)?;
    whole_minutes_micros.checked_add((seconds * 1e6).round() as u64)
}

/// How often a column family was found in a delayed or stopped write condition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallConditionCounts {
    /// Writes were slowed down (RocksDB's `total-delays`).
    pub delays: u64,
    /// Writes were stopped (RocksDB's `total-stops`).
    pub stops: u64,
}

/// The delay and stop totals in the text of `rocksdb.cf-write-stall-stats`.
///
/// RocksDB prints one line of `name: count` pairs separated by commas, such as
/// `Write Stall (count): l0-file-count-limit-delays: 3, ..., total-delays: 3, total-stops: 1`.
/// Returns `None` unless both totals are there.
pub fn parse_stall_condition_counts(text: &str) -> Option<StallConditionCounts> {
    let rest = text.lines().find_map(|line| line.trim().strip_prefix("Write Stall (count):"))?;
    let mut delays = None;
    let mut stops = None;
    for pair in rest.split(',') {
        let Some((name, count)) = pair.split_once(':') else {
            continue;
        };
        let count = count.trim().parse::<u64>().ok();
        match name.trim() {
            "total-delays" => delays = count,
            "total-stops" => stops = count,
            _ => {}
        }
    }
    Some(StallConditionCounts { delays: delays?, stops: stops? })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `rocksdb.dbstats` text of RocksDB 11.8.1, as `DumpDBStats` prints it.
    const DB_STATS: &str = "\n** DB Stats **\nUptime(secs): 95.3 total, 95.3 interval\n\
        Cumulative writes: 1253K writes, 125M keys, 1089K commit groups, 1.2 writes per commit group, ingest: \
        13.57 GB, 145.83 MB/s\n\
        Cumulative WAL: 1253K writes, 0 syncs, 1253000.00 writes per sync, written: 13.57 GB, 145.83 MB/s\n\
        Cumulative stall: 00:01:2.345 H:M:S, 65.4 percent\n\
        Interval writes: 1253K writes, 125M keys, 1089K commit groups, 1.2 writes per commit group, ingest: \
        13895.12 MB, 145.83 MB/s\n\
        Interval WAL: 1253K writes, 0 syncs, 1253000.00 writes per sync, written: 13.57 GB, 145.83 MB/s\n\
        Interval stall: 00:01:2.345 H:M:S, 65.4 percent\n";

    #[test]
    fn cumulative_stall_time_is_read_from_dbstats() {
        assert_eq!(parse_cumulative_stall_micros(DB_STATS), Some(62_345_000));
        let no_stall = DB_STATS.replace("00:01:2.345", "00:00:0.000");
        assert_eq!(parse_cumulative_stall_micros(&no_stall), Some(0));
        let two_digit_seconds = DB_STATS.replace("00:01:2.345", "00:00:12.500");
        assert_eq!(parse_cumulative_stall_micros(&two_digit_seconds), Some(12_500_000));
        let hours = DB_STATS.replace("00:01:2.345", "02:03:4.005");
        assert_eq!(parse_cumulative_stall_micros(&hours), Some(((2 * 60 + 3) * 60 + 4) * 1_000_000 + 5_000));
    }

    #[test]
    fn other_stall_shapes_are_refused() {
        assert_eq!(parse_cumulative_stall_micros(""), None);
        assert_eq!(parse_cumulative_stall_micros("Cumulative stall: 62.345 sec, 65.4 percent"), None);
        assert_eq!(parse_cumulative_stall_micros("Cumulative stall: 00:61:02.345 H:M:S, 1 percent"), None);
        assert_eq!(parse_cumulative_stall_micros("Cumulative stall: 00:01:x H:M:S, 1 percent"), None);
        assert_eq!(parse_cumulative_stall_micros("Cumulative stall: 00:01:02:03 H:M:S, 1 percent"), None);
        // The interval line alone is not the cumulative figure.
        assert_eq!(parse_cumulative_stall_micros("Interval stall: 00:01:02.345 H:M:S, 65.4 percent"), None);
    }

    #[test]
    fn stall_condition_totals_are_read() {
        let text = "Write Stall (count): cf-l0-file-count-limit-delays-with-ongoing-compaction: 4, \
            cf-l0-file-count-limit-stops-with-ongoing-compaction: 1, l0-file-count-limit-delays: 7, \
            l0-file-count-limit-stops: 2, memtable-limit-delays: 0, memtable-limit-stops: 1, \
            pending-compaction-bytes-delays: 5, pending-compaction-bytes-stops: 0, total-delays: 12, \
            total-stops: 3\n";
        assert_eq!(parse_stall_condition_counts(text), Some(StallConditionCounts { delays: 12, stops: 3 }));
        let with_interval = format!("{text}interval: 15 total count\n");
        assert_eq!(parse_stall_condition_counts(&with_interval), Some(StallConditionCounts { delays: 12, stops: 3 }));
        assert_eq!(parse_stall_condition_counts("Write Stall (count): total-delays: 12\n"), None);
        assert_eq!(parse_stall_condition_counts("total-delays: 1, total-stops: 2\n"), None);
        assert_eq!(parse_stall_condition_counts("Write Stall (count): total-delays: x, total-stops: 2\n"), None);
    }
}
