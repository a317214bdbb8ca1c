#!/usr/bin/env python3
"""Appends one sysbench run's figures to sysbench.csv and its per-second lines to
sysbench_timeseries.csv.

Usage: parse_sysbench.py LOG LABEL WORKLOAD TABLES TABLE_SIZE THREADS PREPARE_SECONDS OUTDIR
"""

import csv
import os
import re
import sys

SUMMARY = ["label", "workload", "tables", "table_size", "threads", "prepare_seconds", "seconds",
           "transactions", "tps", "queries", "qps", "errors", "avg_ms", "p95_ms", "max_ms"]
SERIES = ["label", "workload", "elapsed_s", "tps", "qps", "p95_ms", "errors_per_s"]


def parse(text):
    """The summary figures of a sysbench 1.0 `run` output; raises ValueError when one is missing."""
    def grab(pattern, group=1):
        match = re.search(pattern, text, re.MULTILINE)
        if not match:
            raise ValueError("sysbench output has no line matching %r" % pattern)
        return float(match.group(group))

    figures = {
        "transactions": grab(r"^\s*transactions:\s+(\d+)"),
        "tps": grab(r"^\s*transactions:\s+\d+\s+\(([\d.]+) per sec"),
        "queries": grab(r"^\s*queries:\s+(\d+)"),
        "qps": grab(r"^\s*queries:\s+\d+\s+\(([\d.]+) per sec"),
        "errors": grab(r"^\s*ignored errors:\s+(\d+)"),
        "seconds": grab(r"^\s*total time:\s+([\d.]+)s"),
        "avg_ms": grab(r"^\s*avg:\s+([\d.]+)"),
        "p95_ms": grab(r"^\s*95th percentile:\s+([\d.]+)"),
        "max_ms": grab(r"^\s*max:\s+([\d.]+)"),
    }
    series = []
    for match in re.finditer(r"^\[ (\d+)s \] thds: \d+ tps: ([\d.]+) qps: ([\d.]+) .*?lat \(ms,95%\): ([\d.]+) err/s: ([\d.]+)",
                             text, re.MULTILINE):
        series.append([float(value) for value in match.groups()])
    return figures, series


def append(path, columns, rows):
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(columns)
        writer.writerows(rows)


def main():
    if len(sys.argv) != 9:
        sys.exit(__doc__)
    log, label, workload, tables, size, threads, prepare, outdir = sys.argv[1:]
    with open(log) as handle:
        figures, series = parse(handle.read())
    row = [label, workload, tables, size, threads, prepare] + [
        "%g" % figures[name] for name in SUMMARY[6:]]
    append(os.path.join(outdir, "sysbench.csv"), SUMMARY, [row])
    append(os.path.join(outdir, "sysbench_timeseries.csv"), SERIES,
           [[label, workload] + ["%g" % value for value in line] for line in series])


if __name__ == "__main__":
    main()
