// Command iibench runs a queue of insert-benchmark tasks from a TOML file against MariaDB and
// writes one TSV per task (plus .errcodes when errors happen) into runs/<timestamp>/.
//
//	iibench [-dsn DSN] [-out runs] [-run-dir DIR] [-tasks a,b] [-check] tasks.toml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"riptide/sqlbench/internal/csvout"
	"riptide/sqlbench/internal/iibench"
)

func main() {
	os.Exit(run())
}

func run() int {
	dsn := flag.String("dsn", "", "DSN for every task, overriding the file's (e.g. root@unix(/path/mariadbd.sock)/iibench)")
	out := flag.String("out", "runs", "base directory: each run writes OUT/<timestamp>/ and points OUT/latest at it")
	runDir := flag.String("run-dir", "", "write into exactly this directory instead of OUT/<timestamp>/")
	only := flag.String("tasks", "", "comma-separated task names to run (default: all, in file order)")
	check := flag.Bool("check", false, "only parse and validate the task file")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: iibench [flags] tasks.toml\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		return 2
	}
	tasks, err := loadTasks(flag.Arg(0), *dsn, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "iibench:", err)
		return 2
	}
	if *check {
		fmt.Printf("%s: %d tasks OK\n", flag.Arg(0), len(tasks))
		return 0
	}
	directory, err := prepareRunDirectory(*out, *runDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "iibench:", err)
		return 1
	}
	fmt.Printf("iibench: %d tasks, results in %s\n", len(tasks), directory)

	// The first Ctrl-C ends the running task cleanly (its TSV keeps what it measured) and skips
	// the rest of the queue; a second one exits at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		fmt.Fprintln(os.Stderr, "iibench: interrupted; finishing the current task (Ctrl-C again to quit now)")
		cancel()
		<-signals
		os.Exit(130)
	}()

	summary, err := csvout.Create(filepath.Join(directory, "summary.tsv"), '\t', iibench.SummaryColumns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "iibench:", err)
		return 1
	}
	defer summary.Close()
	status := 0
	for _, task := range tasks {
		if ctx.Err() != nil {
			fmt.Printf("iibench: skipping task %s (interrupted)\n", task.Name)
			continue
		}
		fmt.Printf("iibench: task %s: table %s, %d writers, %d query threads, %s\n",
			task.Name, task.Table, task.WriterThreads, task.QueryThreads, describeEnd(task))
		result, err := iibench.RunTask(ctx, task, directory, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "iibench:", err)
			status = 1
			if result.DurationSeconds == 0 {
				continue
			}
		}
		if err := writeSummary(summary, result); err != nil {
			fmt.Fprintln(os.Stderr, "iibench:", err)
			return 1
		}
		fmt.Printf("iibench: task %s: %d rows in %.1f s (%.0f rows/s), insert p99 %.1f ms, %d queries (p99 %.2f ms), %d errors\n",
			result.Task, result.Rows, result.DurationSeconds, result.InsertsPerSecond(), result.Insert.P99Ms,
			result.Queries, result.Query.P99Ms, result.Errors)
	}
	if ctx.Err() != nil && status == 0 {
		status = 130
	}
	return status
}

func loadTasks(path, dsn, only string) ([]iibench.Task, error) {
	tasks, err := iibench.ParseFileWithDSN(path, dsn)
	if err != nil {
		return nil, err
	}
	if only == "" {
		return tasks, nil
	}
	wanted := map[string]bool{}
	for _, name := range strings.Split(only, ",") {
		wanted[strings.TrimSpace(name)] = true
	}
	var chosen []iibench.Task
	for _, task := range tasks {
		if wanted[task.Name] {
			chosen = append(chosen, task)
			delete(wanted, task.Name)
		}
	}
	for name := range wanted {
		return nil, fmt.Errorf("-tasks: no task named %q in %s", name, path)
	}
	return chosen, nil
}

func describeEnd(task iibench.Task) string {
	var parts []string
	if task.MaxRowsTotal > 0 {
		parts = append(parts, fmt.Sprintf("up to %d rows", task.MaxRowsTotal))
	}
	if task.Duration > 0 {
		parts = append(parts, "for at most "+task.Duration.String())
	}
	return strings.Join(parts, ", ")
}

// prepareRunDirectory creates the run's directory and, for timestamped runs, repoints
// OUT/latest at it.
func prepareRunDirectory(out, exact string) (string, error) {
	if exact != "" {
		return exact, os.MkdirAll(exact, 0o755)
	}
	name := time.Now().UTC().Format("20060102T150405Z")
	directory := filepath.Join(out, name)
	if err := os.MkdirAll(directory, 0o755); err != nil {
		return "", err
	}
	latest := filepath.Join(out, "latest")
	if err := os.Remove(latest); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return directory, os.Symlink(name, latest)
}

func writeSummary(summary *csvout.Writer, result iibench.Result) error {
	return summary.Write(result.Task, result.Table, result.TableOptions, result.Rows, result.DurationSeconds,
		result.InsertsPerSecond(), result.Insert.MeanMs, result.Insert.P50Ms, result.Insert.P95Ms, result.Insert.P99Ms,
		result.Insert.P999Ms, result.Insert.MaxMs, result.Queries, result.QueriesPerSecond(), result.Query.MeanMs,
		result.Query.P50Ms, result.Query.P95Ms, result.Query.P99Ms, result.Query.P999Ms, result.Query.MaxMs,
		result.Errors, result.Interrupted)
}
