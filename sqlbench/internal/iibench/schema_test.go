package iibench

import (
	"strings"
	"testing"
	"time"
)

func TestCreateTableSQL(t *testing.T) {
	tests := []struct {
		name        string
		task        Task
		contains    []string
		notContains []string
	}{
		{"seed shape", Task{Table: "p", NumSecondaryIndexes: 3, NumCharFields: 4, LengthCharFields: 100, TableOptions: "ENGINE=InnoDB"},
			[]string{"transactionid INT NOT NULL AUTO_INCREMENT", "charfield4 VARCHAR(100)", "KEY marketsegment (price, customerid)",
				"KEY registersegment (cashregisterid, price, customerid)", "KEY pdc (price, dateandtime, customerid)", ") ENGINE=InnoDB"},
			[]string{"charfield5"}},
		{"one index, no padding", Task{Table: "q", NumSecondaryIndexes: 1, LengthCharFields: 10},
			[]string{"KEY marketsegment"}, []string{"registersegment", "pdc", "charfield"}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			ddl := CreateTableSQL(&test.task)
			for _, want := range test.contains {
				if !strings.Contains(ddl, want) {
					t.Errorf("DDL lacks %q:\n%s", want, ddl)
				}
			}
			for _, unwanted := range test.notContains {
				if strings.Contains(ddl, unwanted) {
					t.Errorf("DDL has %q:\n%s", unwanted, ddl)
				}
			}
		})
	}
}

func TestInsertSQLPlaceholders(t *testing.T) {
	tests := []struct {
		charFields, rows, wantPlaceholders int
	}{
		{0, 1, 5},
		{4, 1000, 9000},
		{2, 3, 21},
	}
	for _, test := range tests {
		task := Task{Table: "p", NumCharFields: test.charFields}
		statement := InsertSQL(&task, test.rows)
		if got := strings.Count(statement, "?"); got != test.wantPlaceholders {
			t.Errorf("%d char fields x %d rows: %d placeholders, want %d", test.charFields, test.rows, got, test.wantPlaceholders)
		}
		if got := strings.Count(statement, "("); got != test.rows+1 {
			t.Errorf("%d rows: %d value lists, want %d", test.rows, got-1, test.rows)
		}
	}
}

func TestCharValueCompressibility(t *testing.T) {
	tests := []struct {
		length, percent, wantTail int
	}{
		{100, 30, 30},
		{100, 0, 0},
		{100, 100, 100},
		{10, 55, 5},
	}
	for _, test := range tests {
		task := Task{NumCharFields: 1, LengthCharFields: test.length, PercentCompressible: test.percent}
		value := NewRowGenerator(&task, 1).CharValue()
		if len(value) != test.length {
			t.Fatalf("length %d, want %d", len(value), test.length)
		}
		if !strings.HasSuffix(value, strings.Repeat("a", test.wantTail)) {
			t.Errorf("%d%% of %d: %q lacks a %d-byte constant tail", test.percent, test.length, value, test.wantTail)
		}
		for _, r := range value {
			if r < 'a' || r > 'z' {
				t.Fatalf("%q has a byte outside a-z", value)
			}
		}
	}
}

func TestAppendBatchStampsMicroseconds(t *testing.T) {
	task := Task{NumCharFields: 2, LengthCharFields: 8}
	generator := NewRowGenerator(&task, 7)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	args := generator.AppendBatch(nil, 3, start)
	if len(args) != 3*7 {
		t.Fatalf("%d arguments, want 21", len(args))
	}
	for row := 0; row < 3; row++ {
		stamp := args[row*7].(time.Time)
		if want := start.Add(time.Duration(row) * time.Microsecond); !stamp.Equal(want) {
			t.Errorf("row %d stamped %v, want %v", row, stamp, want)
		}
		if register := args[row*7+1].(int); register < 0 || register >= cashRegisters {
			t.Errorf("cash register %d out of range", register)
		}
		if price := args[row*7+4].(int); price < 0 || price >= maxPrice {
			t.Errorf("price %d out of range", price)
		}
	}
}

func TestQueryKindsFollowIndexes(t *testing.T) {
	tests := []struct {
		indexes int
		want    string
	}{
		{0, "pk"},
		{1, "pk marketsegment"},
		{2, "pk marketsegment registersegment"},
		{3, "pk pdc marketsegment registersegment"},
	}
	for _, test := range tests {
		task := Task{Table: "p", NumSecondaryIndexes: test.indexes, QueryLimit: 10}
		var names []string
		for _, kind := range QueryKinds(&task) {
			names = append(names, kind.String())
			statement := QuerySQL(&task, kind)
			if !strings.HasSuffix(statement, "LIMIT 10") {
				t.Errorf("%s query lacks the limit: %s", kind, statement)
			}
			if got, want := strings.Count(statement, "?"), len(NewRowGenerator(&task, 1).QueryArgs(kind, 100, time.Now().Add(-time.Hour), time.Now())); got != want {
				t.Errorf("%s query has %d placeholders but %d arguments", kind, got, want)
			}
		}
		if got := strings.Join(names, " "); got != test.want {
			t.Errorf("%d indexes: kinds %q, want %q", test.indexes, got, test.want)
		}
	}
}

func TestReserveStopsAtTheTotal(t *testing.T) {
	tests := []struct {
		total int64
		batch int64
		want  []int64
	}{
		{2500, 1000, []int64{1000, 1000, 500, 0}},
		{0, 1000, []int64{1000, 1000, 1000, 1000}},
		{1000, 1000, []int64{1000, 0, 0, 0}},
	}
	for _, test := range tests {
		state := &taskState{task: &Task{MaxRowsTotal: test.total}}
		for i, want := range test.want {
			if got := state.reserve(test.batch); got != want {
				t.Errorf("total %d, call %d: reserved %d, want %d", test.total, i, got, want)
			}
		}
	}
}
