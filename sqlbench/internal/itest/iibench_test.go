package itest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"riptide/sqlbench/internal/dbutil"
	"riptide/sqlbench/internal/iibench"
)

func TestIibenchLoadMixedAndInterrupt(t *testing.T) {
	socket := Server(t)
	EachEngine(t, socket, func(t *testing.T, engine string) {
		ctx := context.Background()
		dir := t.TempDir()
		table := "ii_" + strings.ToLower(engine)
		queue := `
[defaults]
dsn = "` + DSN(socket, "sqlbench_itest") + `"
num_secondary_indexes = 3
num_char_fields = 2
length_char_fields = 20
percent_compressible = 30
rows_per_insert = 100
report_every = "500ms"
writer_threads = 2

[[task]]
name = "load"
table = "` + table + `"
table_options = "ENGINE=` + engine + `"
max_rows_total = 3050
duration = "1m"

[[task]]
name = "mixed"
table = "` + table + `"
create_table = false
writer_threads = 1
max_rows_per_second = 1000
query_threads = 2
queries_per_second = 40
query_start_at_rows = 10
duration = "2s"
`
		tasks, err := iibench.Parse(queue)
		if err != nil {
			t.Fatal(err)
		}
		load, err := iibench.RunTask(ctx, tasks[0], dir, nil)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		if load.Rows != 3050 || load.Errors != 0 {
			t.Fatalf("load inserted %d rows with %d errors, want 3050 and 0", load.Rows, load.Errors)
		}
		mixed, err := iibench.RunTask(ctx, tasks[1], dir, nil)
		if err != nil {
			t.Fatalf("mixed: %v", err)
		}
		// 1,000 rows/s in 100-row batches for 2 s: the limiter admits at most 3 windows' worth
		// (the lower bounds only show the workers ran: a loaded machine may fall behind).
		if mixed.Rows < 300 || mixed.Rows > 3000 {
			t.Errorf("mixed inserted %d rows at 1000/s for 2 s", mixed.Rows)
		}
		// 40 queries/s for 2 s over two threads, never catching up: at most 2 x 41.
		if mixed.Queries < 20 || mixed.Queries > 82 {
			t.Errorf("mixed ran %d queries at 40/s for 2 s", mixed.Queries)
		}
		db, err := dbutil.Open(tasks[0].DSN, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var count int64
		if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count != load.Rows+mixed.Rows {
			t.Errorf("the table holds %d rows, the tasks inserted %d", count, load.Rows+mixed.Rows)
		}
		tsv, err := os.ReadFile(filepath.Join(dir, "mixed.tsv"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(tsv)), "\n")
		if len(lines) < 4 || !strings.HasPrefix(lines[0], "elapsed_s\trows\t") {
			t.Errorf("mixed.tsv has %d lines: %q", len(lines), lines[0])
		}
		if _, err := os.Stat(filepath.Join(dir, "mixed.errcodes")); err == nil {
			t.Errorf("mixed.errcodes exists although no error happened")
		}

		// Ctrl-C: a one-minute task cancelled after a second ends at once with what it has.
		long := tasks[1]
		long.Name, long.LogFile, long.Duration = "long", "long.tsv", time.Minute
		cancelled, cancel := context.WithCancel(ctx)
		time.AfterFunc(time.Second, cancel)
		began := time.Now()
		result, err := iibench.RunTask(cancelled, long, dir, nil)
		if err != nil {
			t.Fatalf("interrupted task: %v", err)
		}
		if took := time.Since(began); took > 10*time.Second || !result.Interrupted || result.Rows == 0 {
			t.Errorf("interrupted task took %s, interrupted=%v, rows=%d", took, result.Interrupted, result.Rows)
		}
	})
}

func TestIibenchFailedBatchesAreCountedByCode(t *testing.T) {
	socket := Server(t)
	// The table exists with a padding column too short for the task's values: every batch
	// fails with 1406 (data too long, strict mode), is counted, not retried, and after 100 in a
	// row the task stops with an error naming it.
	dsn := DSN(socket, "sqlbench_itest")
	ctx := context.Background()
	if err := dbutil.EnsureDatabase(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	db, err := dbutil.Open(dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, statement := range []string{
		"DROP TABLE IF EXISTS ii_narrow",
		"CREATE TABLE ii_narrow (transactionid INT NOT NULL AUTO_INCREMENT PRIMARY KEY, dateandtime DATETIME(6), cashregisterid INT, customerid INT, productid INT, price INT, charfield1 VARCHAR(5)) ENGINE=InnoDB",
	} {
		if _, err := db.Exec(statement); err != nil {
			t.Fatal(err)
		}
	}
	tasks, err := iibench.Parse(`
[[task]]
name = "narrow"
dsn = "` + dsn + `"
table = "ii_narrow"
create_table = false
num_char_fields = 1
length_char_fields = 50
rows_per_insert = 10
writer_threads = 1
report_every = "200ms"
duration = "30s"
`)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	result, err := iibench.RunTask(ctx, tasks[0], dir, nil)
	if err == nil || !strings.Contains(err.Error(), "in a row failed") {
		t.Fatalf("want the task to stop after failures in a row, got %v", err)
	}
	if result.Rows != 0 || result.Errors < 100 {
		t.Errorf("rows %d, errors %d", result.Rows, result.Errors)
	}
	codes, err := os.ReadFile(filepath.Join(dir, "narrow.errcodes"))
	if err != nil {
		t.Fatalf("no .errcodes file: %v", err)
	}
	if !strings.HasPrefix(string(codes), "elapsed_s\tkind\tcode\tinterval_count\tcumulative_count\n") ||
		!strings.Contains(string(codes), "\tinsert\t1406\t") {
		t.Errorf(".errcodes:\n%s", codes)
	}
}
