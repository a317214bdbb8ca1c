// Package mysqlerr classifies errors from the MariaDB driver: the code a benchmark buckets a
// failure under, and whether a transaction should simply be tried again.
package mysqlerr

import (
	"context"
	"database/sql/driver"
	"errors"
	"strconv"

	"github.com/go-sql-driver/mysql"
)

// Server error numbers the benchmarks treat specially.
const (
	LockWaitTimeout = 1205
	Deadlock        = 1213
	// RecordChanged (ER_CHECKREAD) is InnoDB's "Record has changed since last read", a write
	// conflict under snapshot isolation; the transaction is rolled back and may be tried again.
	RecordChanged = 1020
	// CommitFailed (ER_ERROR_DURING_COMMIT) is how MyRocks reports a commit its write-conflict or
	// busy checks refused (seed 002's sysbench runs ignore it together with 1213).
	CommitFailed = 1180
)

// Code names an error for counting: the server's error number when there is one, "timeout" or
// "cancelled" for context ends, "connection" for a dropped connection and "other" otherwise.
func Code(err error) string {
	var serverError *mysql.MySQLError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &serverError):
		return strconv.Itoa(int(serverError.Number))
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn):
		return "connection"
	default:
		return "other"
	}
}

// Number is the server's error number, or 0 when err does not come from the server.
func Number(err error) int {
	var serverError *mysql.MySQLError
	if errors.As(err, &serverError) {
		return int(serverError.Number)
	}
	return 0
}

// Retryable reports whether a transaction that failed with err should be run again from the
// start: deadlocks and lock wait timeouts roll the transaction back (or leave it to be rolled
// back) without anything having been wrong with it.
func Retryable(err error) bool {
	switch Number(err) {
	case Deadlock, LockWaitTimeout, RecordChanged, CommitFailed:
		return true
	}
	return false
}
