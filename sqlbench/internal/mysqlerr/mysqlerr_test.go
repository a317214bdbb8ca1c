package mysqlerr

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestCodeAndRetryable(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		wantCode      string
		wantRetryable bool
	}{
		{"nil", nil, "", false},
		{"deadlock", &mysql.MySQLError{Number: 1213}, "1213", true},
		{"wrapped lock wait timeout", fmt.Errorf("payment: %w", &mysql.MySQLError{Number: 1205}), "1205", true},
		{"record changed", &mysql.MySQLError{Number: 1020}, "1020", true},
		{"myrocks commit refused", &mysql.MySQLError{Number: 1180}, "1180", true},
		{"error during rollback is not a conflict", &mysql.MySQLError{Number: 1181}, "1181", false},
		{"no such table", &mysql.MySQLError{Number: 1146}, "1146", false},
		{"duplicate key", &mysql.MySQLError{Number: 1062}, "1062", false},
		{"deadline", context.DeadlineExceeded, "timeout", false},
		{"cancel", fmt.Errorf("query: %w", context.Canceled), "cancelled", false},
		{"bad connection", driver.ErrBadConn, "connection", false},
		{"anything else", errors.New("boom"), "other", false},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if got := Code(test.err); got != test.wantCode {
				t.Errorf("Code = %q, want %q", got, test.wantCode)
			}
			if got := Retryable(test.err); got != test.wantRetryable {
				t.Errorf("Retryable = %v, want %v", got, test.wantRetryable)
			}
		})
	}
}
