package itest

import (
	"context"
	"strings"
	"testing"
	"time"

	"riptide/sqlbench/internal/dbutil"
	"riptide/sqlbench/internal/tpcc"
)

func failedConditions(results []tpcc.CheckResult) []int {
	var failed []int
	for _, result := range results {
		if !result.Skipped && result.Violations > 0 {
			failed = append(failed, result.Condition.Number)
		}
	}
	return failed
}

func TestTPCCLoadRunCheck(t *testing.T) {
	socket := Server(t)
	EachEngine(t, socket, func(t *testing.T, engine string) {
		ctx := context.Background()
		dsn := DSN(socket, "sqlbench_tpcc_"+strings.ToLower(engine))
		load, err := tpcc.Load(ctx, tpcc.LoadOptions{DSN: dsn, Warehouses: 1, Threads: 2, TableOptions: "ENGINE=" + engine, Seed: 1})
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		// One warehouse: 100,000 items and stock rows, 10 districts, 30,000 customers, history
		// rows and orders, 9,000 new orders, 5 to 15 lines per order.
		if load.Rows < 100000+1+100000+10+3*30000+9000+5*30000 || load.Rows > 100000+1+100000+10+3*30000+9000+15*30000 {
			t.Errorf("loaded %d rows", load.Rows)
		}
		db, err := dbutil.Open(dsn, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		results, err := tpcc.Check(ctx, db, true)
		if err != nil {
			t.Fatal(err)
		}
		if failed := failedConditions(results); len(failed) > 0 {
			t.Fatalf("after the load, conditions %v do not hold", failed)
		}
		run, err := tpcc.Run(ctx, tpcc.RunOptions{DSN: dsn, Connections: 3, Rampup: 500 * time.Millisecond,
			Duration: 4 * time.Second, ReportEvery: time.Second, Seed: 2})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if run.Warehouses != 1 || run.NOPM <= 0 || run.TPM <= 0 || len(run.Samples) < 3 {
			t.Errorf("run: warehouses %d, NOPM %.0f, TPM %.0f, %d samples", run.Warehouses, run.NOPM, run.TPM, len(run.Samples))
		}
		var newOrders int64
		for _, kind := range run.Kinds {
			if kind.Completed == 0 {
				t.Errorf("no %s completed", kind.Kind)
			}
			if kind.Kind == "new_order" {
				newOrders = kind.Completed - kind.Rollbacks
			}
		}
		// NOPM comes from the districts, the client counts its own commits: both count the
		// same New-Orders, give or take the ones in flight at the two ends of the phase.
		fromServer := run.NOPM * run.Seconds / 60
		if diff := fromServer - float64(newOrders); diff > 6 || diff < -6 {
			t.Errorf("NOPM counts %.0f new orders, the client committed %d", fromServer, newOrders)
		}
		results, err = tpcc.Check(ctx, db, false)
		if err != nil {
			t.Fatal(err)
		}
		if failed := failedConditions(results); len(failed) > 0 {
			for _, result := range results {
				for _, example := range result.Examples {
					t.Logf("condition %d: %s", result.Condition.Number, example)
				}
			}
			t.Fatalf("after the run, conditions %v do not hold on %s", failed, engine)
		}
		// A lost order line and a payment applied twice must be caught.
		if _, err := db.Exec("DELETE FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 3 AND ol_o_id = 10 AND ol_number = 1"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("UPDATE district SET d_ytd = d_ytd + 1 WHERE d_w_id = 1 AND d_id = 2"); err != nil {
			t.Fatal(err)
		}
		results, err = tpcc.Check(ctx, db, false)
		if err != nil {
			t.Fatal(err)
		}
		failed := failedConditions(results)
		want := map[int]bool{1: true, 4: true, 6: true, 9: true}
		for _, number := range failed {
			delete(want, number)
		}
		if len(want) > 0 {
			t.Errorf("after corrupting the tables, conditions %v failed; conditions 1, 4, 6 and 9 should have", failed)
		}
		if _, err := db.Exec("DROP DATABASE sqlbench_tpcc_" + strings.ToLower(engine)); err != nil {
			t.Fatal(err)
		}
	})
}
