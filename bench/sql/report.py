#!/usr/bin/env python3
"""Writes report.md and PNG charts for a results directory of bench/sql/run.sh.

Usage: python3 bench/sql/report.py bench/results/sql-latest

Reads the CSV files the kit's tools wrote (patterns.csv, patterns_size.csv, sysbench.csv,
sysbench_timeseries.csv, tpcc.csv, tpcc_load.csv, tpcc_timeseries.csv, tpcc_check.csv,
iibench/<profile>-<engine>/*.tsv), engines.csv, failures.csv, machine.txt, run.env and cnf/.
Charts are drawn with matplotlib like bench/plot.py's; without it the report says so and has
tables only. Labels are "<profile>/<engine>".
"""

import csv
import glob
import math
import os
import sys

ENGINE_ORDER = ["InnoDB", "RocksDB", "RIPTIDE"]
COLORS = {"InnoDB": "#2ca02c", "RocksDB": "#ff7f0e", "RIPTIDE": "#1f77b4"}
ENGINE_NAMES = {"InnoDB": "InnoDB", "RocksDB": "MyRocks", "RIPTIDE": "RIPTIDE"}
SYSBENCH_WORKLOADS = ["oltp_read_write", "oltp_read_only", "oltp_write_only", "oltp_update_non_index", "oltp_delete"]
PATTERNS = ["seq_insert", "batch_insert", "random_read", "seq_read", "random_update", "seq_update", "zipf_read", "zipf_update"]
TRANSACTIONS = ["new_order", "payment", "order_status", "delivery", "stock_level"]


def number(row, name):
    text = (row.get(name) or "").strip() if row else ""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_csv(path, delimiter=","):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter=delimiter))


def read_env(path):
    values = {}
    if os.path.exists(path):
        with open(path) as handle:
            for line in handle:
                if "=" in line:
                    key, value = line.rstrip("\n").split("=", 1)
                    values[key] = value
    return values


def split_label(label):
    profile, _, engine = label.partition("/")
    return profile, engine


def fmt(value, digits=None):
    if value is None:
        return "–"
    if digits is None:
        magnitude = abs(value)
        digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 0.1 else 3
    return "{:,.{}f}".format(value, digits)


def full_intervals(points):
    """The interval rows without a last partial interval shorter than half of the one before:
    its few samples would draw a spike or a drop that is not the engine's."""
    if len(points) >= 3:
        last = (number(points[-1], "elapsed_s") or 0) - (number(points[-2], "elapsed_s") or 0)
        before = (number(points[-2], "elapsed_s") or 0) - (number(points[-3], "elapsed_s") or 0)
        if last < before / 2:
            return points[:-1]
    return points


def megabytes(row, field):
    value = number(row, field)
    return value / 1048576 if value is not None else None


def engines_in(rows, profile="aligned"):
    present = {split_label(row["label"])[1] for row in rows if split_label(row["label"])[0] == profile}
    return [engine for engine in ENGINE_ORDER if engine in present] + sorted(present - set(ENGINE_ORDER))


class Report:
    def __init__(self, directory):
        self.dir = directory
        self.lines = []
        self.charts = []
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            self.plt = plt
        except ImportError:
            self.plt = None

    def add(self, text=""):
        self.lines.append(text)

    def table(self, header, rows):
        self.add("| " + " | ".join(header) + " |")
        self.add("|" + "|".join(["---"] * len(header)) + "|")
        for row in rows:
            self.add("| " + " | ".join(str(cell) for cell in row) + " |")
        self.add()

    def chart(self, name, title):
        """Saves the current figure as name.png and links it."""
        path = os.path.join(self.dir, name + ".png")
        self.plt.tight_layout()
        self.plt.savefig(path, dpi=110)
        self.plt.close()
        self.add("![%s](%s.png)" % (title, name))
        self.add()

    def grouped_bars(self, axis, groups, engines, value_of, label, log=False):
        width = 0.8 / max(len(engines), 1)
        for index, engine in enumerate(engines):
            positions, values = [], []
            for position, group in enumerate(groups):
                value = value_of(group, engine)
                if value is not None and (value > 0 or not log):
                    positions.append(position - 0.4 + width * (index + 0.5))
                    values.append(value)
            axis.bar(positions, values, width=width, label=ENGINE_NAMES.get(engine, engine), color=COLORS.get(engine))
        axis.set_xticks(range(len(groups)))
        axis.set_xticklabels(groups, rotation=20, ha="right", fontsize=8)
        if log:
            axis.set_yscale("log")
        axis.set_ylabel(label)
        axis.grid(axis="y", alpha=0.3)
        axis.legend(fontsize=8)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    report = Report(directory)
    env = read_env(os.path.join(directory, "run.env"))
    machine = read_env(os.path.join(directory, "machine.txt"))
    engines_rows = read_csv(os.path.join(directory, "engines.csv"))
    failures = read_csv(os.path.join(directory, "failures.csv"))

    report.add("# SQL benchmark kit: InnoDB vs MyRocks vs RIPTIDE")
    report.add()
    report.add("Scale **%s** (`bash bench/sql/run.sh %s`), profiles: %s. Started %s, finished %s." % (
        env.get("scale", "?"), env.get("scale", "?"), env.get("profiles", "?"), env.get("started", "?"), env.get("finished", "?")))
    report.add("One run per engine and workload on a shared machine: the intervals show variance within a run, "
               "not between runs. Load average at the start %s, at the end %s." % (env.get("loadavg_start", "?"), env.get("loadavg_end", "?")))
    report.add()
    report.add("## Engines")
    report.add()
    report.table(["profile", "engine", "status", "detail"],
                 [[row["profile"], ENGINE_NAMES.get(row["engine"], row["engine"]), row["status"], row["detail"]] for row in engines_rows])
    skipped = [row for row in engines_rows if row["status"] != "loaded"]
    for row in skipped:
        report.add("- **%s skipped in profile %s**: %s" % (row["engine"], row["profile"], row["detail"]))
    if skipped:
        report.add()

    headline = []
    sections = []
    sections.append(lambda: iibench_section(report, directory, headline))
    sections.append(lambda: tpcc_section(report, directory, headline))
    sections.append(lambda: sysbench_section(report, directory, headline))
    sections.append(lambda: patterns_section(report, directory, headline))
    body_start = len(report.lines)
    for section in sections:
        section()
    body = report.lines[body_start:]
    report.lines = report.lines[:body_start]

    report.add("## Headline figures (one row per seed's headline metric)")
    report.add()
    all_engines = [engine for engine in ENGINE_ORDER if any(row["engine"] == engine and row["status"] == "loaded" for row in engines_rows)]
    if headline:
        report.table(["seed", "metric"] + [ENGINE_NAMES.get(engine, engine) for engine in all_engines],
                     [[seed, metric] + [cells.get(engine, "–") for engine in all_engines] for seed, metric, cells in headline])
    else:
        report.add("No results were recorded.")
        report.add()
    if report.plt is None:
        report.add("*matplotlib is not installed: no charts (`python3 -m pip install matplotlib`).*")
        report.add()
    report.lines.extend(body)

    report.add("## Failures")
    report.add()
    if failures:
        report.table(["step", "exit status", "last error line (raw/<step>.log has the whole output)"],
                     [[row["step"], row["exit_status"], row["detail"]] for row in failures])
    else:
        report.add("None: every step finished.")
        report.add()

    report.add("## Machine and versions")
    report.add()
    report.table(["", ""], [[key, value] for key, value in machine.items()])
    report.add("Scale parameters: " + ", ".join("%s=%s" % (key, value) for key, value in env.items()
                                                if key.isupper()))
    report.add()
    report.add("## Server configuration")
    report.add()
    report.add("Each profile ran on its own fresh private server (`mariadb/server.sh`, option file below; "
               "`ha_rocksdb.so` and, when built, `ha_riptide.so` are loaded by the script). InnoDB compresses "
               "pages only for `PAGE_COMPRESSED=1` tables; like seed 000, the kit creates its tables without it, "
               "so `innodb_compression_algorithm` is set but unused. RIPTIDE compresses blocks with LZ4 by default.")
    report.add()
    for path in sorted(glob.glob(os.path.join(directory, "cnf", "*.cnf"))):
        profile = os.path.basename(path)[:-4]
        report.add("### Profile `%s`" % profile)
        report.add()
        report.add("```ini")
        with open(path) as handle:
            report.add(handle.read().rstrip())
        report.add("```")
        effective = os.path.join(directory, "cnf", profile + ".effective.tsv")
        if os.path.exists(effective):
            with open(effective) as handle:
                pairs = [line.rstrip("\n").split("\t", 1) for line in handle if "\t" in line]
            report.add()
            report.add("Effective values (`SHOW GLOBAL VARIABLES`): " + "; ".join("`%s=%s`" % (k, v) for k, v in pairs))
        report.add()

    with open(os.path.join(directory, "report.md"), "w") as handle:
        handle.write("\n".join(report.lines) + "\n")
    print("bench/sql/report.py: wrote %s" % os.path.join(directory, "report.md"))


def iibench_section(report, directory, headline):
    runs = sorted(glob.glob(os.path.join(directory, "iibench", "*", "summary.tsv")))
    if not runs:
        return
    report.add("## iibench (seed 000)")
    report.add()
    report.add("A load phase (writers uncapped until the row target or the time limit), then a mixed phase on the "
               "loaded table (throttled inserts, paced queries rotating over the pk, pdc, marketsegment and "
               "registersegment queries). Three secondary indexes, four VARCHAR(100) fields 30 % compressible, "
               "1,000-row prepared INSERTs.")
    report.add()
    summaries, series = {}, {}
    for path in runs:
        run = os.path.basename(os.path.dirname(path))
        profile, _, engine_lower = run.partition("-")
        engine = next((e for e in ENGINE_ORDER if e.lower() == engine_lower), engine_lower)
        for row in read_csv(path, "\t"):
            phase = "load" if row["task"].endswith("_load") else "mixed"
            summaries[(engine, phase)] = row
            series[(engine, phase)] = read_csv(os.path.join(os.path.dirname(path), row["task"] + ".tsv"), "\t")
    engines = [engine for engine in ENGINE_ORDER if (engine, "load") in summaries or (engine, "mixed") in summaries]
    rows = []
    for engine in engines:
        for phase in ("load", "mixed"):
            row = summaries.get((engine, phase))
            if not row:
                continue
            inserts = number(row, "rows") or 0
            queries = number(row, "queries") or 0
            rows.append([ENGINE_NAMES[engine], phase, fmt(inserts, 0), fmt(number(row, "duration_seconds"), 1),
                         fmt(number(row, "inserts_per_second"), 0),
                         fmt(number(row, "insert_p50_ms") if inserts else None), fmt(number(row, "insert_p99_ms") if inserts else None),
                         fmt(number(row, "insert_max_ms") if inserts else None), fmt(queries, 0),
                         fmt(number(row, "query_p50_ms") if queries else None),
                         fmt(number(row, "query_p99_ms") if queries else None), fmt(number(row, "errors"), 0)])
    report.table(["engine", "phase", "rows", "seconds", "rows/s", "insert p50 ms", "insert p99 ms", "insert max ms",
                  "queries", "query p50 ms", "query p99 ms", "errors"], rows)

    def cell(engine, phase, field, digits=None, suffix=""):
        value = number(summaries.get((engine, phase)), field)
        return fmt(value, digits) + suffix if value is not None else "–"
    headline.append(("000 iibench", "load: rows/s (rows in seconds)",
                     {e: "%s (%s in %s s)" % (cell(e, "load", "inserts_per_second", 0), cell(e, "load", "rows", 0),
                                               cell(e, "load", "duration_seconds", 1)) for e in engines}))
    headline.append(("000 iibench", "load: insert p99 ms", {e: cell(e, "load", "insert_p99_ms") for e in engines}))
    headline.append(("000 iibench", "mixed: insert p50 / p99 ms", {e: cell(e, "mixed", "insert_p50_ms") + " / " + cell(e, "mixed", "insert_p99_ms") for e in engines}))
    headline.append(("000 iibench", "mixed: query p50 / p99 ms", {e: cell(e, "mixed", "query_p50_ms") + " / " + cell(e, "mixed", "query_p99_ms") for e in engines}))
    if report.plt is None:
        return
    plt = report.plt
    figure, axis = plt.subplots(figsize=(8, 4))
    for engine in engines:
        points = full_intervals(series.get((engine, "load"), []))
        axis.plot([number(p, "elapsed_s") for p in points], [number(p, "interval_inserts_per_s") for p in points],
                  label=ENGINE_NAMES[engine], color=COLORS.get(engine), marker=".")
    axis.set_xlabel("seconds")
    axis.set_ylabel("inserted rows/s (per interval)")
    axis.set_title("iibench load phase: insert rate")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    report.chart("iibench_load", "iibench load phase")
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for axis, field, title in ((axes[0], "insert_p99_ms", "mixed phase: insert p99 (ms)"), (axes[1], "query_p99_ms", "mixed phase: query p99 (ms)")):
        for engine in engines:
            points = full_intervals(series.get((engine, "mixed"), []))
            axis.plot([number(p, "elapsed_s") for p in points], [number(p, field) for p in points],
                      label=ENGINE_NAMES[engine], color=COLORS.get(engine), marker=".")
        axis.set_xlabel("seconds")
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    report.chart("iibench_mixed", "iibench mixed phase latency")


def tpcc_section(report, directory, headline):
    rows = read_csv(os.path.join(directory, "tpcc.csv"))
    loads = read_csv(os.path.join(directory, "tpcc_load.csv"))
    checks = read_csv(os.path.join(directory, "tpcc_check.csv"))
    series = read_csv(os.path.join(directory, "tpcc_timeseries.csv"))
    if not rows and not loads:
        return
    report.add("## TPC-C (seed 001)")
    report.add()
    report.add("The kit's own driver (`sqlbench/cmd/tpcc`) following the TPC-C specification as HammerDB does: "
               "the five transactions from a 23-card deck (10 New-Order, 10 Payment, 1 each of Order-Status, Delivery, "
               "Stock-Level), no keying or think time, deadlocks and lock wait timeouts retried and counted. NOPM is "
               "new orders per minute from the districts' D_NEXT_O_ID; TPM is Com_commit + Com_rollback per minute, as "
               "HammerDB reports them. Latency spans all attempts of a transaction.")
    report.add()
    totals = {row["label"]: row for row in rows if row["transaction"] == "total"}
    load_by = {row["label"]: row for row in loads}
    check_by = {row["label"]: row for row in checks}
    labels = [label for label in list(dict.fromkeys([row["label"] for row in loads] + [row["label"] for row in rows]))]
    table = []
    for label in labels:
        profile, engine = split_label(label)
        total = totals.get(label)
        load = load_by.get(label)
        check = check_by.get(label)
        table.append([profile, ENGINE_NAMES.get(engine, engine), load["warehouses"] if load else "–",
                      total["connections"] if total else "–", fmt(number(load, "build_seconds"), 1),
                      fmt(number(total, "nopm"), 0), fmt(number(total, "tpm"), 0), fmt(number(total, "retries"), 0),
                      fmt(number(total, "failed"), 0), (check["result"] + (" " + check["detail"] if check.get("detail") else "")) if check else "not run"])
    report.table(["profile", "engine", "warehouses", "connections", "build s", "NOPM", "TPM", "retries", "failed", "consistency check"], table)
    if any(row["result"] == "FAIL" for row in checks):
        report.add("**A CONSISTENCY CHECK FAILED: the engine lost, duplicated or misapplied rows under concurrency "
                   "(see raw/*-tpcc-check.log).**")
        report.add()
    errors = read_csv(os.path.join(directory, "tpcc_errors.csv"))
    if errors:
        report.add("Errors that made transactions retry, by code (1213 deadlock, 1205 lock wait timeout, 1020 record "
                   "changed, 1180 refused commit, vanished_new_order: a Delivery found its order gone): " +
                   "; ".join("%s %s: %s" % (row["label"], row["code"], row["count"]) for row in errors) + ".")
        report.add()
    per = [row for row in rows if row["transaction"] != "total"]
    table = []
    for row in per:
        profile, engine = split_label(row["label"])
        table.append([profile, ENGINE_NAMES.get(engine, engine), row["transaction"], fmt(number(row, "completed"), 0),
                      fmt(number(row, "rollbacks"), 0), fmt(number(row, "retries"), 0), fmt(number(row, "avg_ms")),
                      fmt(number(row, "p95_ms")), fmt(number(row, "p99_ms")), fmt(number(row, "max_ms"))])
    report.table(["profile", "engine", "transaction", "completed", "rollbacks", "retries", "avg ms", "p95 ms", "p99 ms", "max ms"], table)

    for profile in ("aligned", "small-cache"):
        present = [label for label in totals if split_label(label)[0] == profile]
        if not present:
            continue
        engines = [e for e in ENGINE_ORDER if "%s/%s" % (profile, e) in totals]
        name = "large cache" if profile == "aligned" else "64 MB cache"
        headline.append(("001 TPC-C", "%s: NOPM / TPM" % name,
                         {e: "%s / %s" % (fmt(number(totals["%s/%s" % (profile, e)], "nopm"), 0), fmt(number(totals["%s/%s" % (profile, e)], "tpm"), 0)) for e in engines}))
        latency = {(row["label"], row["transaction"]): row for row in per}
        headline.append(("001 TPC-C", "%s: avg ms New-Order / Payment / Delivery" % name,
                         {e: " / ".join(fmt(number(latency.get(("%s/%s" % (profile, e), t)), "avg_ms")) for t in ("new_order", "payment", "delivery")) for e in engines}))
        if profile == "aligned":
            headline.append(("001 TPC-C", "schema build seconds",
                             {e: fmt(number(load_by.get("aligned/" + e), "build_seconds"), 1) for e in engines}))
        headline.append(("001 TPC-C", "%s: consistency check" % name, {e: check_by.get("%s/%s" % (profile, e), {}).get("result", "–") for e in engines}))
    if report.plt is None:
        return
    plt = report.plt
    profiles = [p for p in ("aligned", "small-cache") if any(split_label(l)[0] == p for l in totals)]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    engines = [e for e in ENGINE_ORDER if any(split_label(l)[1] == e for l in totals)]
    for axis, field in ((axes[0], "nopm"), (axes[1], "tpm")):
        report.grouped_bars(axis, profiles, engines, lambda p, e: number(totals.get("%s/%s" % (p, e)), field), field.upper())
        axis.set_title("TPC-C " + field.upper())
    report.chart("tpcc_throughput", "TPC-C NOPM and TPM")
    aligned = [row for row in per if split_label(row["label"])[0] == "aligned"]
    if aligned:
        figure, axes = plt.subplots(1, 3, figsize=(14, 4))
        by = {(split_label(row["label"])[1], row["transaction"]): row for row in aligned}
        engines = engines_in(aligned)
        for axis, field in zip(axes, ("avg_ms", "p95_ms", "p99_ms")):
            report.grouped_bars(axis, TRANSACTIONS, engines, lambda t, e: number(by.get((e, t)), field), "ms", log=True)
            axis.set_title("TPC-C latency " + field.replace("_ms", ""))
        report.chart("tpcc_latency", "TPC-C latency per transaction")
    if series:
        figure, axis = plt.subplots(figsize=(8, 4))
        for label in dict.fromkeys(row["label"] for row in series):
            profile, engine = split_label(label)
            points = [row for row in series if row["label"] == label]
            axis.plot([number(p, "elapsed_s") for p in points], [number(p, "nopm") for p in points],
                      label="%s %s" % (ENGINE_NAMES.get(engine, engine), profile), color=COLORS.get(engine),
                      linestyle="-" if profile == "aligned" else "--", marker=".")
        axis.set_xlabel("seconds of the measured phase")
        axis.set_ylabel("NOPM (per interval)")
        axis.set_title("TPC-C new orders per minute over time")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
        report.chart("tpcc_over_time", "TPC-C NOPM over time")


def sysbench_section(report, directory, headline):
    rows = read_csv(os.path.join(directory, "sysbench.csv"))
    series = read_csv(os.path.join(directory, "sysbench_timeseries.csv"))
    if not rows:
        return
    report.add("## sysbench OLTP (seed 002)")
    report.add()
    first = rows[0]
    report.add("sysbench %s tables x %s rows, %s threads; deadlocks (1213), lock wait timeouts (1205), MyRocks' refused "
               "commits (1180) and 1020 ignored and counted as errors, as seed 002 did. Each workload is prepared afresh "
               "(prepare time measured), then settles before its run." % (first["tables"], first["table_size"], first["threads"]))
    report.add()
    table = []
    for row in rows:
        profile, engine = split_label(row["label"])
        table.append([profile, ENGINE_NAMES.get(engine, engine), row["workload"], fmt(number(row, "prepare_seconds"), 1),
                      fmt(number(row, "tps"), 0), fmt(number(row, "qps"), 0), fmt(number(row, "avg_ms")), fmt(number(row, "p95_ms")),
                      fmt(number(row, "max_ms")), fmt(number(row, "errors"), 0)])
    report.table(["profile", "engine", "workload", "prepare s", "TPS", "QPS", "avg ms", "p95 ms", "max ms", "errors"], table)
    by = {(row["label"], row["workload"]): row for row in rows}
    for profile in dict.fromkeys(split_label(row["label"])[0] for row in rows):
        engines = engines_in(rows, profile)
        for workload in SYSBENCH_WORKLOADS:
            cells = {}
            for engine in engines:
                row = by.get(("%s/%s" % (profile, engine), workload))
                if row:
                    cells[engine] = "%s tps, avg %s / p95 %s / max %s ms" % (fmt(number(row, "tps"), 0), fmt(number(row, "avg_ms")),
                                                                             fmt(number(row, "p95_ms")), fmt(number(row, "max_ms")))
            if cells:
                headline.append(("002 sysbench", "%s (%s)" % (workload, profile), cells))
        if profile == "aligned":
            headline.append(("002 sysbench", "prepare seconds (oltp_read_write, aligned)",
                             {e: fmt(number(by.get(("aligned/" + e, "oltp_read_write")), "prepare_seconds"), 1) for e in engines}))
    if report.plt is None:
        return
    plt = report.plt
    profiles = list(dict.fromkeys(split_label(row["label"])[0] for row in rows))
    figure, axes = plt.subplots(1, len(profiles), figsize=(6 * len(profiles), 4), squeeze=False)
    for axis, profile in zip(axes[0], profiles):
        workloads = [w for w in SYSBENCH_WORKLOADS if any(r["workload"] == w and split_label(r["label"])[0] == profile for r in rows)]
        report.grouped_bars(axis, workloads, engines_in(rows, profile), lambda w, e: number(by.get(("%s/%s" % (profile, e), w)), "tps"), "TPS")
        axis.set_title("sysbench TPS, profile " + profile)
    report.chart("sysbench_tps", "sysbench TPS")
    aligned = [row for row in rows if split_label(row["label"])[0] == "aligned"]
    if aligned:
        figure, axes = plt.subplots(1, 3, figsize=(15, 4))
        for axis, field in zip(axes, ("avg_ms", "p95_ms", "max_ms")):
            report.grouped_bars(axis, SYSBENCH_WORKLOADS, engines_in(aligned), lambda w, e: number(by.get(("aligned/" + e, w)), field), "ms", log=True)
            axis.set_title("sysbench latency " + field.replace("_ms", ""))
        report.chart("sysbench_latency", "sysbench latency")
    aligned_series = [row for row in series if split_label(row["label"])[0] == "aligned"]
    if aligned_series:
        workloads = [w for w in SYSBENCH_WORKLOADS if any(r["workload"] == w for r in aligned_series)]
        figure, axes = plt.subplots(1, len(workloads), figsize=(4 * len(workloads), 3.5), squeeze=False)
        for axis, workload in zip(axes[0], workloads):
            for engine in engines_in(aligned_series):
                points = [r for r in aligned_series if r["workload"] == workload and r["label"] == "aligned/" + engine]
                axis.plot([number(p, "elapsed_s") for p in points], [number(p, "tps") for p in points],
                          label=ENGINE_NAMES.get(engine, engine), color=COLORS.get(engine))
            axis.set_title(workload, fontsize=9)
            axis.set_xlabel("seconds")
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
        axes[0][0].set_ylabel("TPS (per second)")
        report.chart("sysbench_over_time", "sysbench TPS over time")


def patterns_section(report, directory, headline):
    rows = read_csv(os.path.join(directory, "patterns.csv"))
    sizes = read_csv(os.path.join(directory, "patterns_size.csv"))
    if not rows:
        return
    report.add("## Access patterns and space (seed 003)")
    report.add()
    report.add("One table `(id BIGINT PRIMARY KEY, grp INT, payload VARCHAR(100), KEY(grp))` per engine: single-row "
               "INSERTs in key order, then 100-row batch INSERTs, then point READs and UPDATEs by random, sequential "
               "and zipfian (YCSB, theta 0.99, scrambled) keys, each in autocommit. Size on disk: InnoDB's "
               "tablespace as allocated; for MyRocks and RIPTIDE the growth of their directory over the run (write-ahead "
               "logs included, memtables not flushed), then again after OPTIMIZE TABLE (InnoDB rebuilds the table, the "
               "LSM engines compact it). Logical bytes are 12 + the payload's length per row.")
    report.add()
    table = []
    for row in rows:
        profile, engine = split_label(row["label"])
        table.append([profile, ENGINE_NAMES.get(engine, engine), row["pattern"], row["threads"], fmt(number(row, "ops"), 0),
                      fmt(number(row, "ops_per_second"), 0), fmt(number(row, "avg_ms"), 3), fmt(number(row, "p50_ms"), 3),
                      fmt(number(row, "p95_ms"), 3), fmt(number(row, "p99_ms"), 3), fmt(number(row, "errors"), 0)])
    report.table(["profile", "engine", "pattern", "threads", "ops", "ops/s", "avg ms", "p50 ms", "p95 ms", "p99 ms", "errors"], table)
    table = []
    for row in sizes:
        profile, engine = split_label(row["label"])
        table.append([profile, ENGINE_NAMES.get(engine, engine), fmt(number(row, "rows"), 0), fmt(megabytes(row, "logical_bytes"), 2),
                      fmt(megabytes(row, "disk_bytes"), 2), fmt(number(row, "space_amplification"), 2),
                      fmt(megabytes(row, "optimized_disk_bytes"), 2), fmt(number(row, "optimized_space_amplification"), 2), row["method"]])
    report.table(["profile", "engine", "rows", "logical MB", "on disk MB after the run", "space amplification",
                  "on disk MB after OPTIMIZE TABLE", "space amplification", "measured as"], table)
    by = {(row["label"], row["pattern"]): row for row in rows}
    size_by = {row["label"]: row for row in sizes}
    engines = engines_in(rows)
    for profile in dict.fromkeys(split_label(row["label"])[0] for row in rows):
        suffix = "" if profile == "aligned" else " (%s)" % profile
        for pattern in PATTERNS:
            key = lambda e: ("%s/%s" % (profile, e), pattern)
            cells = {e: "%s ms (%s ops/s)" % (fmt(number(by.get(key(e)), "p95_ms"), 3), fmt(number(by.get(key(e)), "ops_per_second"), 0))
                     for e in engines_in(rows, profile) if key(e) in by}
            if cells:
                headline.append(("003 patterns", "%s: p95 (throughput)%s" % (pattern, suffix), cells))
    headline.append(("003 patterns", "table size on disk MB (space amplification): after the run; after OPTIMIZE TABLE",
                     {e: "%s (%sx); %s (%sx)" % (fmt(megabytes(size_by["aligned/" + e], "disk_bytes"), 2),
                                               fmt(number(size_by["aligned/" + e], "space_amplification"), 2),
                                               fmt(megabytes(size_by["aligned/" + e], "optimized_disk_bytes"), 2),
                                               fmt(number(size_by["aligned/" + e], "optimized_space_amplification"), 2))
                      for e in engines if "aligned/" + e in size_by}))
    if report.plt is None:
        return
    plt = report.plt
    aligned = [row for row in rows if split_label(row["label"])[0] == "aligned"]
    figure, axes = plt.subplots(1, 2, figsize=(13, 4))
    report.grouped_bars(axes[0], PATTERNS, engines, lambda p, e: number(by.get(("aligned/" + e, p)), "ops_per_second"), "ops/s (rows/s for inserts)", log=True)
    axes[0].set_title("Patterns: throughput")
    report.grouped_bars(axes[1], PATTERNS, engines, lambda p, e: number(by.get(("aligned/" + e, p)), "p95_ms"), "ms", log=True)
    axes[1].set_title("Patterns: p95 latency")
    report.chart("patterns", "access patterns")
    if sizes:
        aligned_sizes = [row for row in sizes if split_label(row["label"])[0] == "aligned"]
        figure, axes = plt.subplots(1, 2, figsize=(10, 4))
        names = [ENGINE_NAMES.get(split_label(r["label"])[1], r["label"]) for r in aligned_sizes]
        colors = [COLORS.get(split_label(r["label"])[1]) for r in aligned_sizes]
        positions = list(range(len(aligned_sizes)))
        for axis, field, scale in ((axes[0], "disk_bytes", 1048576), (axes[1], "space_amplification", 1)):
            other = "optimized_disk_bytes" if field == "disk_bytes" else "optimized_space_amplification"
            axis.bar([p - 0.2 for p in positions], [(number(r, field) or 0) / scale for r in aligned_sizes], width=0.4,
                     color=colors, label="after the run")
            axis.bar([p + 0.2 for p in positions], [(number(r, other) or 0) / scale for r in aligned_sizes], width=0.4,
                     color=colors, alpha=0.5, hatch="//", label="after OPTIMIZE TABLE")
            axis.set_xticks(positions)
            axis.set_xticklabels(names)
            axis.grid(axis="y", alpha=0.3)
        axes[0].plot(positions, [(number(r, "logical_bytes") or 0) / 1048576 for r in aligned_sizes], "k_", markersize=40, label="logical")
        axes[0].set_ylabel("MB")
        axes[0].set_title("Table size on disk")
        axes[0].legend(fontsize=8)
        axes[1].set_title("Space amplification (disk / logical)")
        report.chart("size", "table size and space amplification")
    del aligned


if __name__ == "__main__":
    main()
