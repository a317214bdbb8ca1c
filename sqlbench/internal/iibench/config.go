// Package iibench is the insert benchmark: writers append rows with three secondary indexes to
// maintain while query threads read through those indexes, from a queue of tasks in TOML.
package iibench

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Task is one entry of the queue, with the defaults already applied.
type Task struct {
	Name string
	// Driver and Dialect are accepted for compatibility with task files written for other
	// iibench ports; only MariaDB (and MySQL, the same protocol) is supported.
	Driver              string
	Dialect             string
	DSN                 string
	Table               string
	CreateTable         bool
	TableOptions        string
	NumSecondaryIndexes int
	NumCharFields       int
	LengthCharFields    int
	PercentCompressible int
	RowsPerInsert       int
	WriterThreads       int
	MaxRowsTotal        int64
	MaxRowsPerSecond    int64
	QueryThreads        int
	QueriesPerSecond    float64
	QueryStartAtRows    int64
	QueryLimit          int
	Duration            time.Duration
	ReportEvery         time.Duration
	LogFile             string
}

// maxPlaceholders is the server's limit on parameters in one prepared statement; a multi-row
// INSERT has one per column per row.
const maxPlaceholders = 65535

// builtinDefaults are used for keys that neither [defaults] nor the task sets.
func builtinDefaults() Task {
	return Task{
		Driver:              "mariadb",
		Dialect:             "mariadb",
		Table:               "purchases_index",
		CreateTable:         true,
		NumSecondaryIndexes: 3,
		NumCharFields:       0,
		LengthCharFields:    100,
		PercentCompressible: 0,
		RowsPerInsert:       1000,
		WriterThreads:       1,
		QueryLimit:          10,
		ReportEvery:         10 * time.Second,
	}
}

// setter applies one TOML value to a task, or explains why the value is wrong.
type setter func(task *Task, value any) error

var setters = map[string]setter{
	"name":                  stringSetter(func(t *Task) *string { return &t.Name }),
	"driver":                stringSetter(func(t *Task) *string { return &t.Driver }),
	"dialect":               stringSetter(func(t *Task) *string { return &t.Dialect }),
	"dsn":                   stringSetter(func(t *Task) *string { return &t.DSN }),
	"table":                 stringSetter(func(t *Task) *string { return &t.Table }),
	"create_table":          boolSetter(func(t *Task) *bool { return &t.CreateTable }),
	"table_options":         stringSetter(func(t *Task) *string { return &t.TableOptions }),
	"num_secondary_indexes": intSetter(func(t *Task) *int { return &t.NumSecondaryIndexes }),
	"num_char_fields":       intSetter(func(t *Task) *int { return &t.NumCharFields }),
	"length_char_fields":    intSetter(func(t *Task) *int { return &t.LengthCharFields }),
	"percent_compressible":  intSetter(func(t *Task) *int { return &t.PercentCompressible }),
	"rows_per_insert":       intSetter(func(t *Task) *int { return &t.RowsPerInsert }),
	"writer_threads":        intSetter(func(t *Task) *int { return &t.WriterThreads }),
	"max_rows_total":        int64Setter(func(t *Task) *int64 { return &t.MaxRowsTotal }),
	"max_rows_per_second":   int64Setter(func(t *Task) *int64 { return &t.MaxRowsPerSecond }),
	"query_threads":         intSetter(func(t *Task) *int { return &t.QueryThreads }),
	"queries_per_second":    floatSetter(func(t *Task) *float64 { return &t.QueriesPerSecond }),
	"query_start_at_rows":   int64Setter(func(t *Task) *int64 { return &t.QueryStartAtRows }),
	"query_limit":           intSetter(func(t *Task) *int { return &t.QueryLimit }),
	"duration":              durationSetter(func(t *Task) *time.Duration { return &t.Duration }),
	"report_every":          durationSetter(func(t *Task) *time.Duration { return &t.ReportEvery }),
	"log_file":              stringSetter(func(t *Task) *string { return &t.LogFile }),
}

func stringSetter(field func(*Task) *string) setter {
	return func(task *Task, value any) error {
		text, ok := value.(string)
		if !ok {
			return fmt.Errorf("want a string, got %s", describe(value))
		}
		*field(task) = text
		return nil
	}
}

func boolSetter(field func(*Task) *bool) setter {
	return func(task *Task, value any) error {
		flag, ok := value.(bool)
		if !ok {
			return fmt.Errorf("want true or false, got %s", describe(value))
		}
		*field(task) = flag
		return nil
	}
}

func int64Setter(field func(*Task) *int64) setter {
	return func(task *Task, value any) error {
		number, ok := value.(int64)
		if !ok {
			return fmt.Errorf("want an integer, got %s", describe(value))
		}
		*field(task) = number
		return nil
	}
}

func intSetter(field func(*Task) *int) setter {
	return func(task *Task, value any) error {
		number, ok := value.(int64)
		if !ok {
			return fmt.Errorf("want an integer, got %s", describe(value))
		}
		if number > 1<<31-1 || number < -(1<<31) {
			return fmt.Errorf("%d is out of range", number)
		}
		*field(task) = int(number)
		return nil
	}
}

func floatSetter(field func(*Task) *float64) setter {
	return func(task *Task, value any) error {
		switch number := value.(type) {
		case int64:
			*field(task) = float64(number)
		case float64:
			*field(task) = number
		default:
			return fmt.Errorf("want a number, got %s", describe(value))
		}
		return nil
	}
}

// durationSetter takes Go duration text ("10s", "20m", "1h30m") or a whole number of seconds.
func durationSetter(field func(*Task) *time.Duration) setter {
	return func(task *Task, value any) error {
		switch v := value.(type) {
		case string:
			duration, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("want a duration such as \"10s\" or \"20m\", got %q", v)
			}
			*field(task) = duration
		case int64:
			*field(task) = time.Duration(v) * time.Second
		default:
			return fmt.Errorf("want a duration such as \"10s\", got %s", describe(value))
		}
		return nil
	}
}

func describe(value any) string {
	switch value.(type) {
	case string:
		return fmt.Sprintf("the string %q", value)
	case int64:
		return fmt.Sprintf("the integer %v", value)
	case float64:
		return fmt.Sprintf("the number %v", value)
	case bool:
		return fmt.Sprintf("the boolean %v", value)
	default:
		return fmt.Sprintf("a %T", value)
	}
}

// ParseFile reads a task queue from a TOML file.
func ParseFile(path string) ([]Task, error) {
	var document map[string]any
	if _, err := toml.DecodeFile(path, &document); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tasks, err := build(document)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tasks, nil
}

// Parse reads a task queue from TOML text.
func Parse(text string) ([]Task, error) {
	var document map[string]any
	if _, err := toml.Decode(text, &document); err != nil {
		return nil, err
	}
	return build(document)
}

func build(document map[string]any) ([]Task, error) {
	for key := range document {
		if key != "defaults" && key != "task" {
			return nil, fmt.Errorf("unknown top-level key %q (only [defaults] and [[task]] are allowed)", key)
		}
	}
	base := builtinDefaults()
	if raw, present := document["defaults"]; present {
		defaults, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("[defaults] must be a table")
		}
		if err := apply(&base, defaults, "[defaults]"); err != nil {
			return nil, err
		}
	}
	raw, present := document["task"]
	if !present {
		return nil, fmt.Errorf("no [[task]] entries")
	}
	entries, ok := raw.([]map[string]any)
	if !ok {
		return nil, fmt.Errorf("task must be written as [[task]] tables")
	}
	tasks := make([]Task, 0, len(entries))
	names := map[string]int{}
	for index, entry := range entries {
		task := base
		task.Name = ""
		label := fmt.Sprintf("task #%d", index+1)
		if name, ok := entry["name"].(string); ok && name != "" {
			label = fmt.Sprintf("task #%d %q", index+1, name)
		}
		if err := apply(&task, entry, label); err != nil {
			return nil, err
		}
		if task.Name == "" {
			return nil, fmt.Errorf("%s: key \"name\" is required", label)
		}
		if previous, seen := names[task.Name]; seen {
			return nil, fmt.Errorf("%s: name %q is already used by task #%d", label, task.Name, previous)
		}
		names[task.Name] = index + 1
		if task.LogFile == "" {
			task.LogFile = task.Name + ".tsv"
		}
		if err := task.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		tasks = append(tasks, task)
	}
	return tasks, nil
}

func apply(task *Task, values map[string]any, label string) error {
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	// Sorted, so the first error reported for a file is the same on every run.
	sort.Strings(keys)
	for _, key := range keys {
		set, known := setters[key]
		if !known {
			return fmt.Errorf("%s: unknown key %q", label, key)
		}
		if err := set(task, values[key]); err != nil {
			return fmt.Errorf("%s: key %q: %w", label, key, err)
		}
	}
	return nil
}

// Validate checks the values that the TOML types alone do not; each error names the key.
func (t *Task) Validate() error {
	problems := []struct {
		bad bool
		key string
		why string
	}{
		{!strings.EqualFold(t.Driver, "mariadb") && !strings.EqualFold(t.Driver, "mysql"), "driver", "must be \"mariadb\" or \"mysql\""},
		{!strings.EqualFold(t.Dialect, "mariadb") && !strings.EqualFold(t.Dialect, "mysql"), "dialect", "must be \"mariadb\" or \"mysql\""},
		{t.DSN == "", "dsn", "is required (or pass --dsn)"},
		{!validIdentifier(t.Table), "table", "must be letters, digits and underscores"},
		{t.NumSecondaryIndexes < 0 || t.NumSecondaryIndexes > 3, "num_secondary_indexes", "must be 0 to 3"},
		{t.NumCharFields < 0 || t.NumCharFields > 100, "num_char_fields", "must be 0 to 100"},
		{t.LengthCharFields < 1 || t.LengthCharFields > 16000, "length_char_fields", "must be 1 to 16000"},
		{t.PercentCompressible < 0 || t.PercentCompressible > 100, "percent_compressible", "must be 0 to 100"},
		{t.RowsPerInsert < 1, "rows_per_insert", "must be at least 1"},
		{t.RowsPerInsert*t.columnCount() > maxPlaceholders, "rows_per_insert",
			fmt.Sprintf("times %d columns exceeds the server's %d parameters per statement", t.columnCount(), maxPlaceholders)},
		{t.WriterThreads < 0, "writer_threads", "must not be negative"},
		{t.QueryThreads < 0, "query_threads", "must not be negative"},
		{t.WriterThreads == 0 && t.QueryThreads == 0, "writer_threads", "and query_threads are both 0: nothing to run"},
		{t.MaxRowsTotal < 0, "max_rows_total", "must not be negative"},
		{t.MaxRowsPerSecond < 0, "max_rows_per_second", "must not be negative"},
		{t.QueriesPerSecond < 0, "queries_per_second", "must not be negative"},
		{t.QueryStartAtRows < 0, "query_start_at_rows", "must not be negative"},
		{t.QueryLimit < 1, "query_limit", "must be at least 1"},
		{t.Duration < 0, "duration", "must not be negative"},
		{t.Duration == 0 && (t.MaxRowsTotal == 0 || t.WriterThreads == 0), "duration",
			"is required unless max_rows_total ends the task (with writers)"},
		{t.ReportEvery < 100*time.Millisecond, "report_every", "must be at least 100ms"},
		{t.LogFile != filepath.Base(t.LogFile) || strings.HasPrefix(t.LogFile, "."), "log_file", "must be a plain file name (it is written into the run directory)"},
	}
	for _, problem := range problems {
		if problem.bad {
			return fmt.Errorf("key %q %s", problem.key, problem.why)
		}
	}
	return nil
}

// columnCount is the number of columns an INSERT names: everything but the auto-increment key.
func (t *Task) columnCount() int {
	return 5 + t.NumCharFields
}

func validIdentifier(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ParseFileWithDSN reads a task queue and, when dsn is not empty, uses it for every task, so one
// file serves any server; the override happens before validation, so a file without dsn keys
// is valid with it.
func ParseFileWithDSN(path, dsn string) ([]Task, error) {
	var document map[string]any
	if _, err := toml.DecodeFile(path, &document); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if dsn != "" {
		defaults, _ := document["defaults"].(map[string]any)
		if defaults == nil {
			defaults = map[string]any{}
			document["defaults"] = defaults
		}
		defaults["dsn"] = dsn
		if entries, ok := document["task"].([]map[string]any); ok {
			for _, entry := range entries {
				delete(entry, "dsn")
			}
		}
	}
	tasks, err := build(document)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tasks, nil
}
