package itest

import (
	"context"
	"strings"
	"testing"

	"riptide/sqlbench/internal/patterns"
)

func TestPatterns(t *testing.T) {
	socket := Server(t)
	EachEngine(t, socket, func(t *testing.T, engine string) {
		results, size, err := patterns.Run(context.Background(), patterns.Options{
			DSN: DSN(socket, "sqlbench_itest"), Table: "pat_" + strings.ToLower(engine), TableOptions: "ENGINE=" + engine,
			Rows: 400, Ops: 300, Threads: 2, Batch: 50, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != len(patterns.All) {
			t.Fatalf("%d results for %d patterns", len(results), len(patterns.All))
		}
		for _, result := range results {
			want := int64(300)
			if strings.HasSuffix(result.Pattern, "insert") {
				want = 400
			}
			// Zipfian updates of hot rows may conflict on some engines: those are counted
			// as errors; everything else must succeed.
			if result.Ops+result.Errors != want || (result.Errors > 0 && result.Pattern != "zipf_update") {
				t.Errorf("%s: %d ops and %d errors, want %d ops", result.Pattern, result.Ops, result.Errors, want)
			}
			if result.Latency.P95Ms <= 0 {
				t.Errorf("%s: no latency recorded", result.Pattern)
			}
		}
		if size.Rows != 800 || size.LogicalBytes != 800*(12+100) || size.Engine != strings.ToUpper(engine) {
			t.Errorf("size: %+v", size)
		}
		if engine == "InnoDB" && (size.DiskBytes <= 0 || size.OptimizedBytes <= 0) {
			t.Errorf("InnoDB's tablespace has %d bytes, %d after OPTIMIZE TABLE", size.DiskBytes, size.OptimizedBytes)
		}
	})
}
