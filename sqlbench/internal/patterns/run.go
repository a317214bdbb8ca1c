package patterns

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"riptide/sqlbench/internal/dbutil"
	"riptide/sqlbench/internal/latency"
	"riptide/sqlbench/internal/mysqlerr"
)

// Options of a patterns run.
type Options struct {
	DSN          string
	Table        string
	TableOptions string
	// Rows is the number of rows each INSERT pattern adds; reads and updates then run Ops
	// operations each over the rows present.
	Rows    int64
	Ops     int64
	Threads int
	Batch   int
	// MaxSeconds caps each pattern (0: no cap), so a slow engine ends in bounded time; the
	// result says how many operations ran.
	MaxSeconds float64
	// PayloadBytes is the length of the VARCHAR payload: 70 % random letters, 30 % one repeated
	// letter, as iibench's padding.
	PayloadBytes int
	Patterns     []Pattern
	// EngineDir, when set, is the directory where the engine keeps all its tables (MyRocks'
	// <datadir>/#rocksdb, RIPTIDE's <datadir>/riptide): the table's bytes on disk are then that
	// directory's growth over the run, log files included, which also works for an engine that
	// reports no DATA_LENGTH. The patterns must be the only writer meanwhile.
	EngineDir string
	Seed      int64
	Progress  io.Writer
}

// Result is one pattern's outcome.
type Result struct {
	Pattern string
	Ops     int64
	Seconds float64
	Errors  int64
	Latency latency.Summary
}

// OpsPerSecond is the pattern's throughput.
func (r Result) OpsPerSecond() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Seconds
}

// Size is the table's footprint after the patterns, as the run left it and again after OPTIMIZE
// TABLE (InnoDB rebuilds the table, the LSM engines compact it).
type Size struct {
	Engine       string
	Rows         int64
	LogicalBytes int64
	DiskBytes    int64
	// OptimizedBytes is the size after OPTIMIZE TABLE, measured the same way; -1 when the
	// engine refused to optimize.
	OptimizedBytes int64
	Method         string
}

// SpaceAmplification is bytes on disk over logical bytes.
func (s Size) SpaceAmplification() float64 { return ratio(s.DiskBytes, s.LogicalBytes) }

// OptimizedAmplification is bytes on disk after OPTIMIZE TABLE over logical bytes.
func (s Size) OptimizedAmplification() float64 { return ratio(s.OptimizedBytes, s.LogicalBytes) }

func ratio(bytes, logical int64) float64 {
	if logical <= 0 || bytes < 0 {
		return 0
	}
	return float64(bytes) / float64(logical)
}

// Pattern is one access pattern.
type Pattern struct {
	Name string
	kind string // insert, batch, read, update
	keys string // seq, random, zipf
}

// All are seed 003's patterns, in the order they run (inserts first: they fill the table).
var All = []Pattern{
	{"seq_insert", "insert", "seq"},
	{"batch_insert", "batch", "seq"},
	{"random_read", "read", "random"},
	{"seq_read", "read", "seq"},
	{"random_update", "update", "random"},
	{"seq_update", "update", "seq"},
	{"zipf_read", "read", "zipf"},
	{"zipf_update", "update", "zipf"},
}

// Select returns the named patterns (comma-separated) in the canonical order; empty is all.
func Select(names string) ([]Pattern, error) {
	if strings.TrimSpace(names) == "" {
		return All, nil
	}
	wanted := map[string]bool{}
	for _, name := range strings.Split(names, ",") {
		wanted[strings.TrimSpace(name)] = true
	}
	var chosen []Pattern
	for _, p := range All {
		if wanted[p.Name] {
			chosen = append(chosen, p)
			delete(wanted, p.Name)
		}
	}
	for name := range wanted {
		return nil, fmt.Errorf("unknown pattern %q (known: seq_insert, batch_insert, random_read, seq_read, random_update, seq_update, zipf_read, zipf_update)", name)
	}
	return chosen, nil
}

type runner struct {
	opts   Options
	db     *sql.DB
	nextID atomic.Int64 // the last id handed out to an inserter
	zipf   *Zipf
}

// Run creates the table, runs the patterns in order and measures the table's size.
func Run(ctx context.Context, opts Options) ([]Result, Size, error) {
	if opts.Threads < 1 {
		opts.Threads = 1
	}
	if opts.Batch < 1 {
		opts.Batch = 100
	}
	if opts.PayloadBytes < 1 {
		opts.PayloadBytes = 100
	}
	if len(opts.Patterns) == 0 {
		opts.Patterns = All
	}
	if err := dbutil.EnsureDatabase(ctx, opts.DSN); err != nil {
		return nil, Size{}, err
	}
	db, err := dbutil.Open(opts.DSN, opts.Threads+1)
	if err != nil {
		return nil, Size{}, err
	}
	defer db.Close()
	r := &runner{opts: opts, db: db}
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+opts.Table); err != nil {
		return nil, Size{}, err
	}
	var before int64
	if opts.EngineDir != "" {
		if before, err = DirectoryBytes(opts.EngineDir); err != nil {
			return nil, Size{}, err
		}
	}
	create := fmt.Sprintf("CREATE TABLE %s (id BIGINT NOT NULL PRIMARY KEY, grp INT NOT NULL, payload VARCHAR(%d) NOT NULL, KEY grp (grp)) %s",
		opts.Table, opts.PayloadBytes, opts.TableOptions)
	if _, err := db.ExecContext(ctx, create); err != nil {
		return nil, Size{}, fmt.Errorf("creating %s: %w", opts.Table, err)
	}
	var results []Result
	for _, pattern := range opts.Patterns {
		if ctx.Err() != nil {
			break
		}
		if pattern.keys == "zipf" && r.zipf == nil && r.nextID.Load() > 0 {
			r.zipf = NewZipf(r.nextID.Load(), 0.99)
		}
		result, err := r.run(ctx, pattern)
		if err != nil {
			return results, Size{}, fmt.Errorf("%s: %w", pattern.Name, err)
		}
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "patterns [%s] %-13s %8d ops in %6.2f s: %9.0f ops/s, p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, %d errors\n",
				opts.Table, result.Pattern, result.Ops, result.Seconds, result.OpsPerSecond(), result.Latency.P50Ms,
				result.Latency.P95Ms, result.Latency.P99Ms, result.Errors)
		}
		results = append(results, result)
	}
	size, err := r.measure(ctx, before)
	if err != nil {
		return results, size, err
	}
	// Then the size once the engine has rebuilt or compacted the table.
	size.OptimizedBytes = -1
	if err := drainQuery(ctx, db, "OPTIMIZE TABLE "+opts.Table); err == nil {
		optimized, err := r.measure(ctx, before)
		if err != nil {
			return results, size, err
		}
		size.OptimizedBytes = optimized.DiskBytes
	}
	return results, size, nil
}

// measure is MeasureSize, with an LSM engine's size taken as its directory's growth when
// EngineDir is set.
func (r *runner) measure(ctx context.Context, before int64) (Size, error) {
	size, err := MeasureSize(ctx, r.db, r.opts.Table, r.opts.EngineDir == "")
	if err == nil && r.opts.EngineDir != "" && size.Engine != "INNODB" {
		var after int64
		after, err = DirectoryBytes(r.opts.EngineDir)
		size.DiskBytes = max(after-before, 0)
		size.Method = "growth of " + filepath.Base(r.opts.EngineDir) + "/ over the run"
	}
	return size, err
}

func drainQuery(ctx context.Context, db *sql.DB, query string) error {
	return dbutil.Drain(db.QueryContext(ctx, query))
}

// DirectoryBytes is the bytes of the files under directory.
func DirectoryBytes(directory string) (int64, error) {
	var total int64
	err := filepath.WalkDir(directory, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file compacted away during the walk
			}
			return err
		}
		if entry.Type().IsRegular() {
			info, err := entry.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			// The apparent size, not the blocks: RocksDB preallocates its log files (72 MB of
			// blocks for a few bytes written), which would hide or inflate growth.
			total += info.Size()
		}
		return nil
	})
	return total, err
}

func (r *runner) payload(random *rand.Rand) string {
	constant := r.opts.PayloadBytes * 30 / 100
	buffer := make([]byte, r.opts.PayloadBytes)
	for i := 0; i < r.opts.PayloadBytes-constant; i++ {
		buffer[i] = byte('a' + random.Intn(26))
	}
	for i := r.opts.PayloadBytes - constant; i < r.opts.PayloadBytes; i++ {
		buffer[i] = 'x'
	}
	return string(buffer)
}

func (r *runner) run(ctx context.Context, pattern Pattern) (Result, error) {
	recorder := latency.NewRecorder()
	var ops, errorsSeen atomic.Int64
	limit := r.opts.Ops
	if pattern.kind == "insert" || pattern.kind == "batch" {
		limit = r.opts.Rows
	}
	rows := r.nextID.Load()
	if pattern.kind == "read" || pattern.kind == "update" {
		if rows == 0 {
			return Result{Pattern: pattern.Name}, fmt.Errorf("the table is empty: run an insert pattern first")
		}
	}
	var claimed atomic.Int64
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.opts.MaxSeconds > 0 {
		var cancelTimeout context.CancelFunc
		stop, cancelTimeout = context.WithTimeout(stop, time.Duration(r.opts.MaxSeconds*float64(time.Second)))
		defer cancelTimeout()
	}
	var group sync.WaitGroup
	errs := make(chan error, r.opts.Threads)
	began := time.Now()
	for thread := 0; thread < r.opts.Threads; thread++ {
		group.Add(1)
		go func(thread int) {
			defer group.Done()
			err := r.worker(stop, pattern, thread, limit, rows, &claimed, &ops, &errorsSeen, recorder)
			if err != nil && stop.Err() == nil {
				errs <- err
				cancel()
			}
		}(thread)
	}
	group.Wait()
	elapsed := time.Since(began)
	close(errs)
	result := Result{Pattern: pattern.Name, Ops: ops.Load(), Seconds: elapsed.Seconds(), Errors: errorsSeen.Load(), Latency: recorder.Total()}
	return result, <-errs
}

// worker is one thread of a pattern. Operations are claimed from a shared counter until limit;
// each runs in autocommit, and a failed one is counted (by the caller's error count) and skipped.
func (r *runner) worker(ctx context.Context, pattern Pattern, thread int, limit, rows int64, claimed, ops, errorsSeen *atomic.Int64, recorder *latency.Recorder) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	table := r.opts.Table
	var text string
	per := int64(1)
	switch pattern.kind {
	case "insert":
		text = fmt.Sprintf("INSERT INTO %s (id, grp, payload) VALUES (?, ?, ?)", table)
	case "batch":
		per = int64(r.opts.Batch)
		text = fmt.Sprintf("INSERT INTO %s (id, grp, payload) VALUES %s", table,
			strings.TrimSuffix(strings.Repeat("(?, ?, ?),", r.opts.Batch), ","))
	case "read":
		text = fmt.Sprintf("SELECT id, grp, payload FROM %s WHERE id = ?", table)
	case "update":
		text = fmt.Sprintf("UPDATE %s SET grp = grp + 1, payload = ? WHERE id = ?", table)
	}
	statement, err := conn.PrepareContext(ctx, text)
	if err != nil {
		return err
	}
	defer statement.Close()
	random := rand.New(rand.NewSource(r.opts.Seed + int64(thread)*7919 + int64(len(pattern.Name))))
	work := context.WithoutCancel(ctx)
	args := make([]any, 0, 3*per)
	for ctx.Err() == nil {
		index := claimed.Add(per) - per
		if index >= limit {
			return nil
		}
		count := min(per, limit-index)
		args = args[:0]
		var id int64
		switch {
		case pattern.kind == "insert" || pattern.kind == "batch":
		case pattern.keys == "seq":
			id = index%rows + 1
		case pattern.keys == "random":
			id = random.Int63n(rows) + 1
		case pattern.keys == "zipf":
			id = r.zipf.Scrambled(random) + 1
		}
		switch pattern.kind {
		case "insert", "batch":
			start := r.nextID.Add(count) - count + 1
			for i := int64(0); i < count; i++ {
				args = append(args, start+i, random.Intn(1000), r.payload(random))
			}
		case "read":
			args = append(args, id)
		case "update":
			args = append(args, r.payload(random), id)
		}
		started := time.Now()
		if count == per {
			err = drainOrExec(work, statement, pattern.kind == "read", args)
		} else {
			_, err = conn.ExecContext(work, fmt.Sprintf("INSERT INTO %s (id, grp, payload) VALUES %s", table,
				strings.TrimSuffix(strings.Repeat("(?, ?, ?),", int(count)), ",")), args...)
		}
		if err != nil {
			if code := mysqlerr.Code(err); code == "connection" || code == "other" {
				return err
			}
			errorsSeen.Add(1)
			continue
		}
		recorder.Record(time.Since(started))
		ops.Add(count)
	}
	return nil
}

func drainOrExec(ctx context.Context, statement *sql.Stmt, read bool, args []any) error {
	if !read {
		_, err := statement.ExecContext(ctx, args...)
		return err
	}
	return dbutil.Drain(statement.QueryContext(ctx, args...))
}

// MeasureSize reports the table's logical bytes (the columns' data: 8 + 4 + the payload's length
// per row) and its bytes on disk: InnoDB's tablespace file as allocated; for other engines the
// server's DATA_LENGTH + INDEX_LENGTH (MyRocks computes them from its SST files, so flush first
// flushes its memtable; RIPTIDE from its tables' approximate sizes).
func MeasureSize(ctx context.Context, db *sql.DB, table string, flush bool) (Size, error) {
	var size Size
	if err := db.QueryRowContext(ctx, "SELECT UPPER(ENGINE) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", table).Scan(&size.Engine); err != nil {
		return size, fmt.Errorf("finding %s's engine: %w", table, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(12 + LENGTH(payload)), 0) FROM "+table).Scan(&size.Rows, &size.LogicalBytes); err != nil {
		return size, err
	}
	if flush && size.Engine == "ROCKSDB" {
		// MyRocks computes DATA_LENGTH from its SST files only. Errors are ignored: an older
		// MyRocks without the variable still reports SST sizes.
		db.ExecContext(ctx, "SET GLOBAL rocksdb_force_flush_memtable_now = ON")
	}
	var name string
	if err := db.QueryRowContext(ctx, "SELECT CONCAT(DATABASE(), '/', ?)", table).Scan(&name); err != nil {
		return size, err
	}
	if size.Engine == "INNODB" {
		err := db.QueryRowContext(ctx, "SELECT ALLOCATED_SIZE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = ?", name).Scan(&size.DiskBytes)
		if err == nil {
			size.Method = "innodb tablespace allocated size"
			return size, nil
		}
	}
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
		return size, err
	}
	var data, index sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT DATA_LENGTH, INDEX_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", table).Scan(&data, &index); err != nil {
		return size, err
	}
	size.DiskBytes = data.Int64 + index.Int64
	size.Method = "DATA_LENGTH + INDEX_LENGTH"
	return size, nil
}
