#!/usr/bin/env python3
"""Draws the charts of a benchtool results directory (results.csv, timeseries.csv).

Usage: python3 bench/plot.py bench/results/latest

Writes speedup.png, throughput.png, latency.png, amplification.png, resources.png and
throughput_over_time.png next to the CSV files; `riptide-bench suite` runs this script and links
the charts from report.md. Without matplotlib it prints how to install it and exits with status 3,
and the report says the charts are missing.
"""

import csv
import math
import os
import sys

ENGINES = ["riptide", "rocksdb", "tidesdb"]
COLORS = {"riptide": "#1f77b4", "rocksdb": "#ff7f0e", "tidesdb": "#9467bd"}
TITLES = {"riptide": "Riptide", "rocksdb": "RocksDB", "tidesdb": "TidesDB"}


def number(row, name):
    """The numeric field `name` of a row, or None when it is empty or absent."""
    text = (row.get(name) or "").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def latest_rows(rows):
    """Test names in order, and the median run of each (test, engine) by ops/s (of an even
    number, the slower middle one), as the report picks it."""
    tests = []
    runs = {}
    for row in rows:
        if row["test"] not in tests:
            tests.append(row["test"])
        runs.setdefault((row["test"], row["engine"]), []).append(row)
    by_key = {}
    for key, group in runs.items():
        group.sort(key=lambda row: number(row, "ops_per_second") or 0.0)
        by_key[key] = group[(len(group) - 1) // 2]
    return tests, by_key


def grouped_bars(axis, tests, by_key, field, scale=1.0, log=False, label=""):
    """Horizontal bars per test, one per engine; tests without the field are left blank."""
    engines = [engine for engine in ENGINES if any((test, engine) in by_key for test in tests)]
    height = 0.8 / max(len(engines), 1)
    for index, engine in enumerate(engines):
        positions, values = [], []
        for position, test in enumerate(tests):
            row = by_key.get((test, engine))
            value = number(row, field) if row else None
            if value is not None and (value > 0 or not log):
                positions.append(position + index * height - 0.4 + height / 2)
                values.append(value * scale)
        axis.barh(positions, values, height=height, label=engine, color=COLORS.get(engine))
    axis.set_yticks(range(len(tests)))
    axis.set_yticklabels(tests, fontsize=7)
    axis.invert_yaxis()
    if log:
        axis.set_xscale("log")
    axis.set_xlabel(label)
    axis.grid(axis="x", alpha=0.3)
    axis.legend(fontsize=8)


def speedup_pairs(tests, by_key, other):
    """(test, Riptide ops/s over `other`'s) for every test both ran."""
    pairs = []
    for test in tests:
        riptide, peer = by_key.get((test, "riptide")), by_key.get((test, other))
        if riptide and peer:
            new, old = number(riptide, "ops_per_second"), number(peer, "ops_per_second")
            if new and old:
                pairs.append((test, new / old))
    return pairs


def plot_speedup(plt, directory, tests, by_key):
    """One panel per other engine: Riptide's throughput over that engine's, per test."""
    panels = [(other, speedup_pairs(tests, by_key, other)) for other in ENGINES[1:]]
    panels = [(other, pairs) for other, pairs in panels if pairs]
    if not panels:
        return
    rows = max(len(pairs) for _, pairs in panels)
    figure, axes = plt.subplots(1, len(panels), figsize=(10 * len(panels), 0.3 * rows + 1.5), squeeze=False)
    for axis, (other, pairs) in zip(axes[0], panels):
        names = [name for name, _ in pairs]
        ratios = [ratio for _, ratio in pairs]
        colors = ["#2ca02c" if ratio >= 1 else "#d62728" for ratio in ratios]
        axis.barh(range(len(pairs)), ratios, color=colors)
        axis.axvline(1.0, color="black", linewidth=1)
        axis.set_xscale("log")
        axis.set_yticks(range(len(pairs)))
        axis.set_yticklabels(names, fontsize=7)
        axis.invert_yaxis()
        for position, ratio in enumerate(ratios):
            axis.text(ratio, position, f" {ratio:.2f}x", va="center", fontsize=7)
        geometric_mean = math.exp(sum(math.log(ratio) for ratio in ratios) / len(ratios))
        title = TITLES.get(other, other)
        axis.set_title(f"Riptide / {title} ops/s (geometric mean {geometric_mean:.2f}x; right of 1 = Riptide faster)")
        axis.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(os.path.join(directory, "speedup.png"), dpi=110)
    plt.close(figure)


def plot_throughput(plt, directory, tests, by_key):
    figure, axis = plt.subplots(figsize=(10, 0.35 * len(tests) + 1.5))
    grouped_bars(axis, tests, by_key, "ops_per_second", log=True, label="operations per second (log)")
    axis.set_title("Throughput per test")
    figure.tight_layout()
    figure.savefig(os.path.join(directory, "throughput.png"), dpi=110)
    plt.close(figure)


def plot_latency(plt, directory, tests, by_key):
    fields = [("latency_p50_us", "p50"), ("latency_p99_us", "p99"), ("latency_p999_us", "p99.9")]
    figure, axes = plt.subplots(1, 3, figsize=(16, 0.35 * len(tests) + 1.5), sharey=True)
    for axis, (field, title) in zip(axes, fields):
        grouped_bars(axis, tests, by_key, field, log=True, label="µs per op or batch (log)")
        axis.set_title(f"{title} latency")
    figure.tight_layout()
    figure.savefig(os.path.join(directory, "latency.png"), dpi=110)
    plt.close(figure)


def plot_amplification(plt, directory, tests, by_key):
    figure, axes = plt.subplots(1, 2, figsize=(14, 0.35 * len(tests) + 1.5))
    for axis, (field, title) in zip(axes, [("write_amplification", "Write amplification"),
                                           ("space_amplification", "Space amplification")]):
        with_field = [test for test in tests
                      if any(number(by_key.get((test, engine)) or {}, field) is not None for engine in ENGINES)]
        grouped_bars(axis, with_field, by_key, field, label="ratio (lower is better)")
        axis.set_title(title)
    figure.tight_layout()
    figure.savefig(os.path.join(directory, "amplification.png"), dpi=110)
    plt.close(figure)


def plot_resources(plt, directory, tests, by_key):
    figure, axes = plt.subplots(1, 2, figsize=(14, 0.35 * len(tests) + 1.5))
    grouped_bars(axes[0], tests, by_key, "peak_rss_bytes", scale=1 / (1024 * 1024), label="MiB")
    axes[0].set_title("Peak RSS of the measured phase")
    grouped_bars(axes[1], tests, by_key, "cpu_percent", label="% of one core (200 = both cores)")
    axes[1].set_title("CPU use")
    figure.tight_layout()
    figure.savefig(os.path.join(directory, "resources.png"), dpi=110)
    plt.close(figure)


# Above this many samples a run's line is drawn without markers, with a moving average on top.
DENSE_SAMPLES = 120
# The moving average of dense runs spans this many one-second samples.
AVERAGE_SAMPLES = 10
# Samples shorter than this are the phase's ragged end, not a whole second (as in the report).
WHOLE_SECOND_MINIMUM_SECONDS = 0.5


def moving_rates(points, width):
    """Trailing averages of (elapsed, operations, interval) points: (elapsed, ops/s) per point."""
    averaged = []
    for index, (elapsed, _operations, _interval) in enumerate(points):
        window = points[max(0, index - width + 1):index + 1]
        seconds = sum(interval for _, _, interval in window)
        if seconds > 0:
            averaged.append((elapsed, sum(operations for _, operations, _ in window) / seconds))
    return averaged


def engine_label(engine, row):
    """The legend entry: the engine, with its stall time and write amplification when known."""
    details = []
    stall = number(row, "write_stall_seconds") if row else None
    if stall is not None:
        details.append(f"stalled {stall:.1f} s")
    amplification = number(row, "write_amplification") if row else None
    if amplification is not None:
        details.append(f"write amp {amplification:.2f}")
    return f"{engine} ({', '.join(details)})" if details else engine


def plot_over_time(plt, directory, rows, by_key):
    samples = read_csv(os.path.join(directory, "timeseries.csv"))
    if not samples:
        return
    # The longest of the long runs and the main write runs (named longrun_* or write_*), up to
    # four; any write run otherwise.
    durations = {}
    for (test, _engine), row in by_key.items():
        if row.get("workload") == "write" and row.get("sync") != "true":
            durations[test] = max(durations.get(test, 0.0), number(row, "duration_seconds") or 0.0)
    main_writes = [test for test in durations if test.startswith(("longrun_", "write_"))]
    candidates = main_writes if main_writes else list(durations)
    longest = sorted(candidates, key=durations.get, reverse=True)[:4]
    if not longest:
        return
    figure, axes = plt.subplots(len(longest), 1, figsize=(10, 2.8 * len(longest)), squeeze=False)
    for axis, test in zip(axes[:, 0], longest):
        for engine in ENGINES:
            points = []
            for sample in samples:
                if sample["test"] != test or sample["engine"] != engine:
                    continue
                elapsed = number(sample, "elapsed_seconds")
                operations = number(sample, "operations")
                interval = number(sample, "interval_seconds")
                if elapsed is not None and operations is not None and interval is not None:
                    # A rerun into the same file starts again at its first second and replaces
                    # the earlier samples, as the report does.
                    if points and elapsed <= points[-1][0]:
                        points = []
                    points.append((elapsed, operations, interval))
            if not points:
                continue
            label = engine_label(engine, by_key.get((test, engine)))
            # The phase's ragged end (a few milliseconds after the last whole second) is left out of
            # the per-second line, where it would show as a drop to nothing; the averages keep it,
            # weighted by its length.
            rates = [(elapsed, operations / interval) for elapsed, operations, interval in points
                     if interval >= WHOLE_SECOND_MINIMUM_SECONDS]
            color = COLORS.get(engine)
            if len(points) > DENSE_SAMPLES:
                # Per-second rates of a long run are a dense band; the average shows the trend.
                axis.plot([x for x, _ in rates], [y for _, y in rates], linewidth=0.5, alpha=0.35, color=color)
                averaged = moving_rates(points, AVERAGE_SAMPLES)
                axis.plot([x for x, _ in averaged], [y for _, y in averaged], linewidth=1.6, color=color,
                          label=f"{label}, {AVERAGE_SAMPLES} s average")
            else:
                axis.plot([x for x, _ in rates], [y for _, y in rates], marker=".", label=label, color=color)
        axis.set_title(test, fontsize=9)
        axis.set_xlabel("seconds")
        axis.set_ylabel("ops/s")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(os.path.join(directory, "throughput_over_time.png"), dpi=110)
    plt.close(figure)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    directory = sys.argv[1]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (python3 -m pip install matplotlib)", file=sys.stderr)
        return 3
    rows = read_csv(os.path.join(directory, "results.csv"))
    if not rows:
        print(f"no results.csv rows in {directory}", file=sys.stderr)
        return 1
    tests, by_key = latest_rows(rows)
    plot_speedup(plt, directory, tests, by_key)
    plot_throughput(plt, directory, tests, by_key)
    plot_latency(plt, directory, tests, by_key)
    plot_amplification(plt, directory, tests, by_key)
    plot_resources(plt, directory, tests, by_key)
    plot_over_time(plt, directory, rows, by_key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
