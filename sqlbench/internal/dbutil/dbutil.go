// Package dbutil opens MariaDB connections the way every tool of the kit needs them.
package dbutil

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Open returns a pool of at most connections connections for dsn (the driver's DSN format,
// e.g. "root@unix(/path/mariadbd.sock)/bench"), with the settings the benchmarks rely on.
func Open(dsn string, connections int) (*sql.DB, error) {
	config, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("bad dsn %q: %w", dsn, err)
	}
	// Statements are prepared on the server (the benchmarks measure the engine, not the
	// client's quoting), and times are sent and read in UTC so no time zone shifts a key.
	config.InterpolateParams = false
	config.ParseTime = true
	config.Loc = time.UTC
	if config.Params == nil {
		config.Params = map[string]string{}
	}
	if _, set := config.Params["time_zone"]; !set {
		config.Params["time_zone"] = "'+00:00'"
	}
	connector, err := mysql.NewConnector(config)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	if connections < 1 {
		connections = 1
	}
	db.SetMaxOpenConns(connections)
	db.SetMaxIdleConns(connections)
	return db, nil
}

// EnsureDatabase creates the DSN's database when it does not exist, so a fresh server needs no
// manual step.
func EnsureDatabase(ctx context.Context, dsn string) error {
	config, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("bad dsn %q: %w", dsn, err)
	}
	name := config.DBName
	if name == "" {
		return nil
	}
	if strings.ContainsAny(name, "`") {
		return fmt.Errorf("database name %q contains a backquote", name)
	}
	config.DBName = ""
	connector, err := mysql.NewConnector(config)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// WithDatabase returns dsn with its database replaced by name.
func WithDatabase(dsn, name string) (string, error) {
	config, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("bad dsn %q: %w", dsn, err)
	}
	config.DBName = name
	return config.FormatDSN(), nil
}

// Engines lists the storage engines the server can use (SUPPORT YES or DEFAULT), upper-case.
func Engines(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT UPPER(ENGINE) FROM information_schema.ENGINES WHERE SUPPORT IN ('YES', 'DEFAULT')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	engines := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		engines[name] = true
	}
	return engines, rows.Err()
}

// Drain reads and discards every row of a query's result (the rows and error QueryContext
// returned), so that a measured query includes fetching its result, and closes it.
func Drain(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}
