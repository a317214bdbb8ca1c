// Package itest holds the kit's integration tests: they run against the MariaDB server whose
// socket SQLBENCH_TEST_SOCKET names (bench/sql/run.sh integration-test starts a private one) and
// are skipped without it. Every storage engine of Engines the server offers is tested.
package itest

import (
	"context"
	"os"
	"strings"
	"testing"

	"riptide/sqlbench/internal/dbutil"
)

// Engines are the engines the kit compares.
var Engines = []string{"InnoDB", "RocksDB", "RIPTIDE"}

// Server returns the socket of the test server, or skips the test.
func Server(t *testing.T) string {
	t.Helper()
	socket := os.Getenv("SQLBENCH_TEST_SOCKET")
	if socket == "" {
		t.Skip("SQLBENCH_TEST_SOCKET is not set (bash bench/sql/run.sh integration-test starts a server and sets it)")
	}
	return socket
}

// DSN is a DSN for database on the test server.
func DSN(socket, database string) string {
	return "root@unix(" + socket + ")/" + database
}

// EachEngine runs test once per engine the server offers, as a subtest named after it; engines
// the server lacks are logged, not failed (RIPTIDE may not be built).
func EachEngine(t *testing.T, socket string, test func(t *testing.T, engine string)) {
	t.Helper()
	db, err := dbutil.Open(DSN(socket, ""), 1)
	if err != nil {
		t.Fatal(err)
	}
	offered, err := dbutil.Engines(context.Background(), db)
	db.Close()
	if err != nil {
		t.Fatalf("listing engines: %v", err)
	}
	ran := 0
	for _, engine := range Engines {
		if !offered[strings.ToUpper(engine)] {
			t.Logf("engine %s is not offered by the server: not tested", engine)
			continue
		}
		ran++
		t.Run(engine, func(t *testing.T) { test(t, engine) })
	}
	if ran == 0 {
		t.Fatal("the server offers none of the kit's engines")
	}
}
