// Command patterns runs seed 003's access patterns (sequential and batch INSERT, random and
// sequential READ and UPDATE, zipfian READ and UPDATE) on one table and reports throughput,
// latency percentiles, the table's size on disk and its space amplification.
//
//	patterns -dsn DSN -table-options ENGINE=RocksDB -rows 50000 -ops 20000 -threads 2 -out DIR -label rocksdb
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"riptide/sqlbench/internal/csvout"
	"riptide/sqlbench/internal/patterns"
)

// ResultColumns are patterns.csv's columns.
var ResultColumns = []string{"label", "engine", "pattern", "threads", "ops", "seconds", "ops_per_second", "errors",
	"avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"}

// SizeColumns are patterns_size.csv's columns.
var SizeColumns = []string{"label", "engine", "rows", "logical_bytes", "disk_bytes", "space_amplification",
	"optimized_disk_bytes", "optimized_space_amplification", "method"}

func main() {
	dsn := flag.String("dsn", "", "MariaDB DSN, e.g. root@unix(/path/mariadbd.sock)/patterns (required)")
	table := flag.String("table", "patterns", "table name (dropped and created)")
	options := flag.String("table-options", "", "table options, e.g. \"ENGINE=InnoDB\"")
	rows := flag.Int64("rows", 50000, "rows each INSERT pattern adds")
	ops := flag.Int64("ops", 20000, "operations of each READ and UPDATE pattern")
	threads := flag.Int("threads", 1, "connections per pattern")
	batch := flag.Int("batch", 100, "rows per statement of batch_insert")
	maxSeconds := flag.Float64("max-seconds", 0, "cap on each pattern's time (0: none)")
	payload := flag.Int("payload", 100, "bytes of each row's VARCHAR payload")
	engineDir := flag.String("engine-dir", "", "the engine's own directory (e.g. DATADIR/#rocksdb): size on disk is its growth over the run")
	names := flag.String("patterns", "", "comma-separated patterns (default: all, in order)")
	out := flag.String("out", "", "directory to append patterns.csv and patterns_size.csv to (optional)")
	label := flag.String("label", "", "label of the rows (e.g. the engine)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "patterns: -dsn is required")
		os.Exit(2)
	}
	chosen, err := patterns.Select(*names)
	if err != nil {
		fmt.Fprintln(os.Stderr, "patterns:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, size, err := patterns.Run(ctx, patterns.Options{DSN: *dsn, Table: *table, TableOptions: *options, Rows: *rows,
		Ops: *ops, Threads: *threads, Batch: *batch, MaxSeconds: *maxSeconds, PayloadBytes: *payload, Patterns: chosen, EngineDir: *engineDir,
		Seed: time.Now().UnixNano(), Progress: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "patterns:", err)
		os.Exit(1)
	}
	fmt.Printf("patterns [%s] %s: %d rows, %d logical bytes, %d on disk (%s): space amplification %.2f; after OPTIMIZE TABLE %d (%.2f)\n",
		*table, size.Engine, size.Rows, size.LogicalBytes, size.DiskBytes, size.Method, size.SpaceAmplification(),
		size.OptimizedBytes, size.OptimizedAmplification())
	if *out == "" {
		return
	}
	if err := write(*out, *label, *threads, results, size); err != nil {
		fmt.Fprintln(os.Stderr, "patterns:", err)
		os.Exit(1)
	}
}

func write(directory, label string, threads int, results []patterns.Result, size patterns.Size) error {
	if err := os.MkdirAll(directory, 0o755); err != nil {
		return err
	}
	writer, err := csvout.Append(filepath.Join(directory, "patterns.csv"), ',', ResultColumns)
	if err != nil {
		return err
	}
	defer writer.Close()
	for _, r := range results {
		if err := writer.Write(label, size.Engine, r.Pattern, threads, r.Ops, r.Seconds, r.OpsPerSecond(), r.Errors,
			r.Latency.MeanMs, r.Latency.P50Ms, r.Latency.P95Ms, r.Latency.P99Ms, r.Latency.MaxMs); err != nil {
			return err
		}
	}
	sizes, err := csvout.Append(filepath.Join(directory, "patterns_size.csv"), ',', SizeColumns)
	if err != nil {
		return err
	}
	defer sizes.Close()
	var optimized, optimizedAmplification any
	if size.OptimizedBytes >= 0 {
		optimized, optimizedAmplification = size.OptimizedBytes, size.OptimizedAmplification()
	}
	return sizes.Write(label, size.Engine, size.Rows, size.LogicalBytes, size.DiskBytes, size.SpaceAmplification(),
		optimized, optimizedAmplification, size.Method)
}
