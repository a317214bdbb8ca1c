package iibench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"riptide/sqlbench/internal/csvout"
	"riptide/sqlbench/internal/dbutil"
	"riptide/sqlbench/internal/latency"
	"riptide/sqlbench/internal/mysqlerr"
	"riptide/sqlbench/internal/ratelimit"
)

// IntervalColumns are the columns of a task's TSV, one row per report interval.
var IntervalColumns = []string{
	"elapsed_s", "rows", "interval_inserts_per_s", "cumulative_inserts_per_s",
	"insert_p50_ms", "insert_p99_ms", "insert_p999_ms",
	"queries", "interval_queries_per_s", "query_p50_ms", "query_p99_ms", "query_p999_ms",
	"errors",
}

// ErrorColumns are the columns of a task's .errcodes TSV.
var ErrorColumns = []string{"elapsed_s", "kind", "code", "interval_count", "cumulative_count"}

// SummaryColumns are the columns of the run's summary.tsv, one row per task.
var SummaryColumns = []string{
	"task", "table", "table_options", "rows", "duration_seconds", "inserts_per_second",
	"insert_avg_ms", "insert_p50_ms", "insert_p95_ms", "insert_p99_ms", "insert_p999_ms", "insert_max_ms",
	"queries", "queries_per_second", "query_avg_ms", "query_p50_ms", "query_p95_ms", "query_p99_ms", "query_p999_ms", "query_max_ms",
	"errors", "interrupted",
}

// Result is what one task did.
type Result struct {
	Task            string
	Table           string
	TableOptions    string
	Rows            int64
	DurationSeconds float64
	Insert          latency.Summary
	Queries         int64
	Query           latency.Summary
	Errors          int64
	Interrupted     bool
}

// InsertsPerSecond is the task's average insert rate.
func (r Result) InsertsPerSecond() float64 {
	if r.DurationSeconds <= 0 {
		return 0
	}
	return float64(r.Rows) / r.DurationSeconds
}

// QueriesPerSecond is the task's average query rate.
func (r Result) QueriesPerSecond() float64 {
	if r.DurationSeconds <= 0 {
		return 0
	}
	return float64(r.Queries) / r.DurationSeconds
}

// errorCounter buckets failures by kind ("insert" or "query") and error code.
type errorCounter struct {
	mu         sync.Mutex
	interval   map[[2]string]int64
	cumulative map[[2]string]int64
	total      atomic.Int64
}

func newErrorCounter() *errorCounter {
	return &errorCounter{interval: map[[2]string]int64{}, cumulative: map[[2]string]int64{}}
}

func (c *errorCounter) add(kind string, err error) {
	key := [2]string{kind, mysqlerr.Code(err)}
	c.mu.Lock()
	c.interval[key]++
	c.cumulative[key]++
	c.mu.Unlock()
	c.total.Add(1)
}

// takeInterval returns this interval's counts, with their cumulative counts, sorted by kind and
// code, and starts a new interval.
func (c *errorCounter) takeInterval() [][4]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([][2]string, 0, len(c.interval))
	for key := range c.interval {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	rows := make([][4]any, 0, len(keys))
	for _, key := range keys {
		rows = append(rows, [4]any{key[0], key[1], c.interval[key], c.cumulative[key]})
	}
	c.interval = map[[2]string]int64{}
	return rows
}

// taskState is shared by a task's workers and its reporter.
type taskState struct {
	task          *Task
	start         time.Time
	deadline      time.Time
	existingRows  int64
	existingMaxID int64
	since         time.Time
	reserved      atomic.Int64
	inserted      atomic.Int64
	queries       atomic.Int64
	insertLatency *latency.Recorder
	queryLatency  *latency.Recorder
	errors        *errorCounter
}

// RunTask runs one task to its end (duration, max_rows_total or ctx's cancellation) and writes
// its TSV files into runDir. progress receives a line per report interval.
func RunTask(ctx context.Context, task Task, runDir string, progress io.Writer) (Result, error) {
	result := Result{Task: task.Name, Table: task.Table, TableOptions: task.TableOptions}
	if err := dbutil.EnsureDatabase(ctx, task.DSN); err != nil {
		return result, fmt.Errorf("task %q: %w", task.Name, err)
	}
	db, err := dbutil.Open(task.DSN, task.WriterThreads+task.QueryThreads+2)
	if err != nil {
		return result, fmt.Errorf("task %q: %w", task.Name, err)
	}
	defer db.Close()

	if task.CreateTable {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+task.Table); err != nil {
			return result, fmt.Errorf("task %q: dropping %s: %w", task.Name, task.Table, err)
		}
		if _, err := db.ExecContext(ctx, CreateTableSQL(&task)); err != nil {
			return result, fmt.Errorf("task %q: creating %s: %w", task.Name, task.Table, err)
		}
	}
	state := &taskState{
		task:          &task,
		insertLatency: latency.NewRecorder(),
		queryLatency:  latency.NewRecorder(),
		errors:        newErrorCounter(),
	}
	// The table's current extent: the highest key bounds the primary-key query, and the oldest
	// stamp bounds the pdc query's random timestamps.
	var oldest sql.NullTime
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(transactionid), 0) FROM "+task.Table).Scan(&state.existingMaxID); err != nil {
		return result, fmt.Errorf("task %q: reading %s (does it exist? create_table = false needs an earlier task to create it): %w", task.Name, task.Table, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT dateandtime FROM "+task.Table+" ORDER BY transactionid LIMIT 1").Scan(&oldest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return result, fmt.Errorf("task %q: reading %s: %w", task.Name, task.Table, err)
	}
	state.existingRows = state.existingMaxID

	intervals, err := csvout.Create(filepath.Join(runDir, task.LogFile), '\t', IntervalColumns)
	if err != nil {
		return result, err
	}
	defer intervals.Close()
	var errorLog *csvout.Writer
	defer func() {
		if errorLog != nil {
			errorLog.Close()
		}
	}()

	state.start = time.Now()
	state.since = state.start
	if oldest.Valid && oldest.Time.Before(state.start) {
		state.since = oldest.Time
	}
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	if task.Duration > 0 {
		state.deadline = state.start.Add(task.Duration)
		var cancelDeadline context.CancelFunc
		stop, cancelDeadline = context.WithDeadline(stop, state.deadline)
		defer cancelDeadline()
	}

	limiter := ratelimit.NewWindow(task.MaxRowsPerSecond, nil)
	var writers, readers sync.WaitGroup
	workerErrors := make(chan error, task.WriterThreads+task.QueryThreads)
	for writer := 0; writer < task.WriterThreads; writer++ {
		writers.Add(1)
		go func(writer int) {
			defer writers.Done()
			if err := state.write(stop, db, limiter, writer); err != nil {
				workerErrors <- err
				cancel()
			}
		}(writer)
	}
	for reader := 0; reader < task.QueryThreads; reader++ {
		readers.Add(1)
		go func(reader int) {
			defer readers.Done()
			if err := state.query(stop, db, reader); err != nil {
				workerErrors <- err
				cancel()
			}
		}(reader)
	}
	// With writers, the task ends when they do (max_rows_total reached); the query threads are
	// then stopped too. Without writers it ends at its deadline.
	writersDone := make(chan struct{})
	go func() {
		writers.Wait()
		if task.WriterThreads > 0 {
			cancel()
		}
		close(writersDone)
	}()

	ticker := time.NewTicker(task.ReportEvery)
	defer ticker.Stop()
	var lastElapsed time.Duration
	var lastRows, lastQueries int64
	report := func(now time.Time) error {
		elapsed := now.Sub(state.start)
		seconds := (elapsed - lastElapsed).Seconds()
		if seconds <= 0 {
			return nil
		}
		rows, queries := state.inserted.Load(), state.queries.Load()
		insert, query := state.insertLatency.Interval(), state.queryLatency.Interval()
		cumulativeRate := float64(rows) / elapsed.Seconds()
		intervalRate := float64(rows-lastRows) / seconds
		queryRate := float64(queries-lastQueries) / seconds
		errorCount := state.errors.total.Load()
		if err := intervals.Write(elapsed.Seconds(), rows, intervalRate, cumulativeRate,
			insert.P50Ms, insert.P99Ms, insert.P999Ms,
			queries, queryRate, query.P50Ms, query.P99Ms, query.P999Ms, errorCount); err != nil {
			return err
		}
		for _, row := range state.errors.takeInterval() {
			if errorLog == nil {
				base := task.LogFile[:len(task.LogFile)-len(filepath.Ext(task.LogFile))]
				var err error
				if errorLog, err = csvout.Create(filepath.Join(runDir, base+".errcodes"), '\t', ErrorColumns); err != nil {
					return err
				}
			}
			if err := errorLog.Write(elapsed.Seconds(), row[0], row[1], row[2], row[3]); err != nil {
				return err
			}
		}
		if progress != nil {
			fmt.Fprintf(progress, "[%s] %6.0fs rows %d (%.0f/s, avg %.0f/s) insert p99 %.1f ms | queries %d (%.1f/s) p99 %.2f ms | errors %d\n",
				task.Name, elapsed.Seconds(), rows, intervalRate, cumulativeRate, insert.P99Ms,
				queries, queryRate, query.P99Ms, errorCount)
		}
		lastElapsed, lastRows, lastQueries = elapsed, rows, queries
		return nil
	}
	var reportErr error
loop:
	for {
		select {
		case now := <-ticker.C:
			if err := report(now); err != nil && reportErr == nil {
				reportErr = err
				cancel()
			}
		case <-writersDone:
			break loop
		case <-stop.Done():
			break loop
		}
	}
	cancel()
	writers.Wait()
	readers.Wait()
	end := time.Now()
	// The last, usually partial, interval: kept unless it is a sliver after the final tick.
	if end.Sub(state.start)-lastElapsed >= 50*time.Millisecond || lastElapsed == 0 {
		if err := report(end); err != nil && reportErr == nil {
			reportErr = err
		}
	}
	close(workerErrors)
	for err := range workerErrors {
		if reportErr == nil {
			reportErr = err
		}
	}
	result.Rows = state.inserted.Load()
	result.Queries = state.queries.Load()
	result.DurationSeconds = end.Sub(state.start).Seconds()
	result.Insert = state.insertLatency.Total()
	result.Query = state.queryLatency.Total()
	result.Errors = state.errors.total.Load()
	result.Interrupted = ctx.Err() != nil
	return result, reportErr
}

// reserve claims up to want rows of max_rows_total; zero when the total is reached.
func (s *taskState) reserve(want int64) int64 {
	if s.task.MaxRowsTotal <= 0 {
		return want
	}
	for {
		reserved := s.reserved.Load()
		left := s.task.MaxRowsTotal - reserved
		if left <= 0 {
			return 0
		}
		take := min(want, left)
		if s.reserved.CompareAndSwap(reserved, reserved+take) {
			return take
		}
	}
}

// write is one writer: prepared multi-row INSERTs until the task ends. A failed batch is counted
// under its error code and not retried; its rows go back to max_rows_total's pool.
func (s *taskState) write(stop context.Context, db *sql.DB, limiter *ratelimit.Window, writer int) error {
	conn, err := db.Conn(stop)
	if err != nil {
		return ignoreStop(stop, fmt.Errorf("writer %d: connecting: %w", writer, err))
	}
	defer conn.Close()
	batch := s.task.RowsPerInsert
	statement, err := conn.PrepareContext(stop, InsertSQL(s.task, batch))
	if err != nil {
		return ignoreStop(stop, fmt.Errorf("writer %d: preparing the INSERT: %w", writer, err))
	}
	defer statement.Close()
	generator := NewRowGenerator(s.task, s.start.UnixNano()+int64(writer)*7919)
	args := make([]any, 0, batch*s.task.columnCount())
	failures := 0
	for stop.Err() == nil {
		rows := s.reserve(int64(batch))
		if rows == 0 {
			return nil
		}
		if err := limiter.Acquire(stop, rows); err != nil {
			s.reserved.Add(-rows)
			return nil
		}
		args = generator.AppendBatch(args[:0], int(rows), time.Now())
		began := time.Now()
		// The statement runs to completion even when the task ends meanwhile: cancelling it
		// would turn the task's end into a spurious error and a broken connection.
		if int(rows) == batch {
			_, err = statement.ExecContext(context.WithoutCancel(stop), args...)
		} else {
			_, err = conn.ExecContext(context.WithoutCancel(stop), InsertSQL(s.task, int(rows)), args...)
		}
		if err != nil {
			s.errors.add("insert", err)
			s.reserved.Add(-rows)
			failures++
			if failures >= maxConsecutiveFailures {
				return fmt.Errorf("writer %d: %d batches in a row failed (the task cannot make progress); the last error: %w",
					writer, failures, err)
			}
			continue
		}
		failures = 0
		s.insertLatency.Record(time.Since(began))
		s.inserted.Add(rows)
	}
	return nil
}

// maxConsecutiveFailures ends a task whose writer or query thread fails this many times in a row:
// failures are counted, not retried, but a table that vanished or a server that went away would
// otherwise turn the rest of the task into a busy loop of errors.
const maxConsecutiveFailures = 100

// query is one query thread: it waits for query_start_at_rows, then runs the query kinds in
// turn, paced to its share of queries_per_second.
func (s *taskState) query(stop context.Context, db *sql.DB, reader int) error {
	for s.existingRows+s.inserted.Load() < s.task.QueryStartAtRows {
		select {
		case <-stop.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	conn, err := db.Conn(stop)
	if err != nil {
		return ignoreStop(stop, fmt.Errorf("query thread %d: connecting: %w", reader, err))
	}
	defer conn.Close()
	kinds := QueryKinds(s.task)
	statements := make([]*sql.Stmt, len(kinds))
	for i, kind := range kinds {
		if statements[i], err = conn.PrepareContext(stop, QuerySQL(s.task, kind)); err != nil {
			return ignoreStop(stop, fmt.Errorf("query thread %d: preparing the %s query: %w", reader, kind, err))
		}
		defer statements[i].Close()
	}
	generator := NewRowGenerator(s.task, s.start.UnixNano()+int64(reader)*104729+1)
	pacer := ratelimit.NewPacer(ratelimit.IntervalFor(s.task.QueriesPerSecond, s.task.QueryThreads), nil)
	// Threads start at different kinds so that every kind runs from the first second on.
	next := reader % len(kinds)
	failures := 0
	for {
		if err := pacer.Wait(stop); err != nil {
			return nil
		}
		index := next
		next = (next + 1) % len(kinds)
		kind := kinds[index]
		maxID := s.existingMaxID + s.inserted.Load()
		args := generator.QueryArgs(kind, maxID, s.since, time.Now())
		began := time.Now()
		if err := drain(context.WithoutCancel(stop), statements[index], args); err != nil {
			s.errors.add("query", err)
			failures++
			if failures >= maxConsecutiveFailures {
				return fmt.Errorf("query thread %d: %d queries in a row failed; the last error: %w", reader, failures, err)
			}
			continue
		}
		failures = 0
		s.queryLatency.Record(time.Since(began))
		s.queries.Add(1)
	}
}

// drain runs a query and reads every row, so the measured time includes fetching the result.
func drain(ctx context.Context, statement *sql.Stmt, args []any) error {
	return dbutil.Drain(statement.QueryContext(ctx, args...))
}

// ignoreStop drops errors caused by the task ending while a worker was still setting up.
func ignoreStop(stop context.Context, err error) error {
	if stop.Err() != nil {
		return nil
	}
	return err
}
