// Command tpcc is a TPC-C driver for MariaDB written from the public specification, shaped like
// HammerDB's: load the nine tables, run the five transactions at the standard mix without keying
// or think time (NOPM, TPM, per-transaction latency), and check the consistency conditions.
//
//	tpcc load  -dsn DSN -warehouses 4 -threads 4 -table-options "ENGINE=RocksDB"
//	tpcc run   -dsn DSN -connections 8 -rampup 1m -duration 5m -out DIR -label innodb
//	tpcc check -dsn DSN [-after-load]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"riptide/sqlbench/internal/csvout"
	"riptide/sqlbench/internal/dbutil"
	"riptide/sqlbench/internal/tpcc"
)

func usage() {
	fmt.Fprintln(os.Stderr, `usage: tpcc load|run|check [flags]   (tpcc COMMAND -h lists a command's flags)`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var status int
	switch os.Args[1] {
	case "load":
		status = load(ctx, os.Args[2:])
	case "run":
		status = run(ctx, os.Args[2:])
	case "check":
		status = check(ctx, os.Args[2:])
	case "-h", "-help", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "tpcc: unknown command %q\n", os.Args[1])
		usage()
		status = 2
	}
	os.Exit(status)
}

// LoadColumns are tpcc_load.csv's columns.
var LoadColumns = []string{"label", "warehouses", "threads", "table_options", "build_seconds", "rows", "rows_per_second"}

// RunColumns are tpcc.csv's columns: one row per transaction kind, plus one "total" row.
var RunColumns = []string{"label", "warehouses", "connections", "duration_seconds", "nopm", "tpm", "client_tpm",
	"transaction", "completed", "rollbacks", "retries", "failed", "avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"}

// ErrorColumns are tpcc_errors.csv's columns: the errors that made transactions retry (or fail),
// by code, over the measured phase.
var ErrorColumns = []string{"label", "code", "count"}

// SeriesColumns are tpcc_timeseries.csv's columns.
var SeriesColumns = []string{"label", "elapsed_s", "nopm", "tpm", "retries", "failed"}

func load(ctx context.Context, args []string) int {
	flags := flag.NewFlagSet("tpcc load", flag.ExitOnError)
	dsn := flags.String("dsn", "", "MariaDB DSN, e.g. root@unix(/path/mariadbd.sock)/tpcc (required)")
	warehouses := flags.Int("warehouses", 1, "number of warehouses")
	threads := flags.Int("threads", 2, "build threads (connections loading in parallel)")
	options := flags.String("table-options", "", "table options of every table, e.g. \"ENGINE=RocksDB\"")
	batch := flags.Int("batch", 500, "rows per multi-row INSERT")
	out := flags.String("out", "", "directory to append tpcc_load.csv to (optional)")
	label := flags.String("label", "", "label of the row in tpcc_load.csv (e.g. the engine)")
	flags.Parse(args)
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "tpcc load: -dsn is required")
		return 2
	}
	fmt.Printf("tpcc load: %d warehouses with %d build threads (%s)\n", *warehouses, *threads, *options)
	result, err := tpcc.Load(ctx, tpcc.LoadOptions{DSN: *dsn, Warehouses: *warehouses, Threads: *threads,
		TableOptions: *options, BatchRows: *batch, Seed: time.Now().UnixNano(), Progress: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tpcc load:", err)
		return 1
	}
	fmt.Printf("tpcc load: built %d rows in %.1f s (%.0f rows/s)\n", result.Rows, result.Seconds, float64(result.Rows)/result.Seconds)
	if *out != "" {
		writer, err := appendCSV(*out, "tpcc_load.csv", LoadColumns)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tpcc load:", err)
			return 1
		}
		defer writer.Close()
		if err := writer.Write(*label, *warehouses, *threads, *options, result.Seconds, result.Rows, float64(result.Rows)/result.Seconds); err != nil {
			fmt.Fprintln(os.Stderr, "tpcc load:", err)
			return 1
		}
	}
	return 0
}

func appendCSV(directory, name string, columns []string) (*csvout.Writer, error) {
	if err := os.MkdirAll(directory, 0o755); err != nil {
		return nil, err
	}
	return csvout.Append(filepath.Join(directory, name), ',', columns)
}

func run(ctx context.Context, args []string) int {
	flags := flag.NewFlagSet("tpcc run", flag.ExitOnError)
	dsn := flags.String("dsn", "", "MariaDB DSN (required)")
	connections := flags.Int("connections", 4, "virtual users: connections running transactions back to back")
	rampup := flags.Duration("rampup", 10*time.Second, "ramp-up before the measured phase (not counted)")
	duration := flags.Duration("duration", time.Minute, "measured duration")
	every := flags.Duration("report-every", 10*time.Second, "progress and time-series interval")
	retries := flags.Int("max-retries", 100, "attempts after a deadlock or lock wait timeout before a transaction counts as failed")
	out := flags.String("out", "", "directory to append tpcc.csv and tpcc_timeseries.csv to (optional)")
	label := flags.String("label", "", "label of the rows (e.g. the engine)")
	flags.Parse(args)
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "tpcc run: -dsn is required")
		return 2
	}
	result, err := tpcc.Run(ctx, tpcc.RunOptions{DSN: *dsn, Connections: *connections, Rampup: *rampup, Duration: *duration,
		ReportEvery: *every, MaxRetries: *retries, Seed: time.Now().UnixNano(), Progress: os.Stdout})
	if err != nil && result.Seconds == 0 {
		fmt.Fprintln(os.Stderr, "tpcc run:", err)
		return 1
	}
	fmt.Printf("tpcc run: %d warehouses, %d connections, %.0f s: NOPM %.0f, TPM %.0f (client-counted %.0f)\n",
		result.Warehouses, result.Connections, result.Seconds, result.NOPM, result.TPM, result.ClientTPM)
	fmt.Printf("  %-13s %10s %9s %8s %7s %9s %9s %9s %9s\n", "transaction", "completed", "rollbacks", "retries", "failed", "avg_ms", "p95_ms", "p99_ms", "max_ms")
	for _, k := range result.Kinds {
		fmt.Printf("  %-13s %10d %9d %8d %7d %9.2f %9.2f %9.2f %9.2f\n", k.Kind, k.Completed, k.Rollbacks, k.Retries, k.Failed,
			k.Latency.MeanMs, k.Latency.P95Ms, k.Latency.P99Ms, k.Latency.MaxMs)
	}
	for _, code := range tpcc.SortedCodes(result.ErrorCodes) {
		fmt.Printf("  error %s: %d\n", code, result.ErrorCodes[code])
	}
	if *out != "" {
		if err := writeRun(*out, *label, result); err != nil {
			fmt.Fprintln(os.Stderr, "tpcc run:", err)
			return 1
		}
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "tpcc run: interrupted; the figures above cover the measured time until then")
		return 130
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tpcc run:", err)
		return 1
	}
	return 0
}

func writeRun(directory, label string, result tpcc.RunResult) error {
	summary, err := appendCSV(directory, "tpcc.csv", RunColumns)
	if err != nil {
		return err
	}
	defer summary.Close()
	var completed, rollbacks, retries, failed int64
	for _, k := range result.Kinds {
		completed += k.Completed
		rollbacks += k.Rollbacks
		retries += k.Retries
		failed += k.Failed
		if err := summary.Write(label, result.Warehouses, result.Connections, result.Seconds, result.NOPM, result.TPM, result.ClientTPM,
			k.Kind, k.Completed, k.Rollbacks, k.Retries, k.Failed, k.Latency.MeanMs, k.Latency.P50Ms, k.Latency.P95Ms,
			k.Latency.P99Ms, k.Latency.MaxMs); err != nil {
			return err
		}
	}
	if err := summary.Write(label, result.Warehouses, result.Connections, result.Seconds, result.NOPM, result.TPM, result.ClientTPM,
		"total", completed, rollbacks, retries, failed, nil, nil, nil, nil, nil); err != nil {
		return err
	}
	codes, err := appendCSV(directory, "tpcc_errors.csv", ErrorColumns)
	if err != nil {
		return err
	}
	defer codes.Close()
	for _, code := range tpcc.SortedCodes(result.ErrorCodes) {
		if err := codes.Write(label, code, result.ErrorCodes[code]); err != nil {
			return err
		}
	}
	series, err := appendCSV(directory, "tpcc_timeseries.csv", SeriesColumns)
	if err != nil {
		return err
	}
	defer series.Close()
	for _, s := range result.Samples {
		if err := series.Write(label, s.ElapsedSeconds, s.NOPM, s.TPM, s.Retries, s.Failed); err != nil {
			return err
		}
	}
	return nil
}

func check(ctx context.Context, args []string) int {
	flags := flag.NewFlagSet("tpcc check", flag.ExitOnError)
	dsn := flags.String("dsn", "", "MariaDB DSN (required)")
	afterLoad := flags.Bool("after-load", false, "also check condition 11, which holds only right after population")
	flags.Parse(args)
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "tpcc check: -dsn is required")
		return 2
	}
	db, err := dbutil.Open(*dsn, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tpcc check:", err)
		return 1
	}
	defer db.Close()
	results, err := tpcc.Check(ctx, db, *afterLoad)
	failed := 0
	for _, result := range results {
		switch {
		case result.Skipped:
			fmt.Printf("  skip  condition %2d: %s (holds only right after the load: -after-load)\n", result.Condition.Number, result.Condition.What)
		case result.Violations == 0:
			fmt.Printf("  ok    condition %2d: %s\n", result.Condition.Number, result.Condition.What)
		default:
			failed++
			fmt.Printf("  FAIL  condition %2d: %s: %d violations\n", result.Condition.Number, result.Condition.What, result.Violations)
			for _, example := range result.Examples {
				fmt.Printf("          %s\n", example)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tpcc check:", err)
		return 1
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "tpcc check: %d consistency conditions DO NOT HOLD: the engine lost, duplicated or misapplied rows\n", failed)
		return 1
	}
	fmt.Println("tpcc check: every consistency condition holds")
	return 0
}
