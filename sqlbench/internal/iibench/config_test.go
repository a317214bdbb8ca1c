package iibench

import (
	"strings"
	"testing"
	"time"
)

const seedLikeQueue = `
[defaults]
driver = "mariadb"
dialect = "mariadb"
dsn = "iibench:iibench@unix(/tmp/mariadb.sock)/iibench"
num_secondary_indexes = 3
num_char_fields = 4
length_char_fields = 100
percent_compressible = 30
rows_per_insert = 1000
report_every = "10s"
query_limit = 10
writer_threads = 16

[[task]]
name = "innodb_load"
table = "purchases_innodb"
create_table = true
table_options = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
duration = "20m"
max_rows_total = 30000000
log_file = "innodb_load.tsv"

[[task]]
name = "innodb_mixed"
table = "purchases_innodb"
create_table = false
writer_threads = 8
max_rows_per_second = 30000
query_threads = 8
queries_per_second = 300
query_start_at_rows = 1000000
duration = "15m"
`

func TestParseAppliesDefaultsThenTask(t *testing.T) {
	tasks, err := Parse(seedLikeQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("got %d tasks, want 2", len(tasks))
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"load writers come from defaults", tasks[0].WriterThreads, 16},
		{"load rows", tasks[0].MaxRowsTotal, int64(30000000)},
		{"load duration", tasks[0].Duration, 20 * time.Minute},
		{"load report interval", tasks[0].ReportEvery, 10 * time.Second},
		{"load log file", tasks[0].LogFile, "innodb_load.tsv"},
		{"mixed overrides writers", tasks[1].WriterThreads, 8},
		{"mixed keeps the table", tasks[1].CreateTable, false},
		{"mixed rate", tasks[1].MaxRowsPerSecond, int64(30000)},
		{"integer qps is a float", tasks[1].QueriesPerSecond, 300.0},
		{"log file defaults to the name", tasks[1].LogFile, "innodb_mixed.tsv"},
		{"compressible from defaults", tasks[1].PercentCompressible, 30},
	}
	for _, test := range tests {
		if test.got != test.want {
			t.Errorf("%s: got %v, want %v", test.name, test.got, test.want)
		}
	}
}

func TestParseErrorsNameKeyAndTask(t *testing.T) {
	const header = "[defaults]\ndsn = \"root@unix(/x)/db\"\n"
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"unknown task key", header + "[[task]]\nname = \"a\"\nduration = \"1s\"\nwriter_thread = 2\n",
			`task #1 "a": unknown key "writer_thread"`},
		{"unknown default key", "[defaults]\nrows = 3\n[[task]]\nname = \"a\"\n", `[defaults]: unknown key "rows"`},
		{"unknown top-level key", "speed = 3\n", `unknown top-level key "speed"`},
		{"wrong type", header + "[[task]]\nname = \"a\"\nduration = \"1s\"\nwriter_threads = \"many\"\n",
			`task #1 "a": key "writer_threads": want an integer, got the string "many"`},
		{"bad duration", header + "[[task]]\nname = \"a\"\nduration = \"soon\"\n", `key "duration": want a duration`},
		{"too many indexes", header + "[[task]]\nname = \"b\"\nduration = \"1s\"\nnum_secondary_indexes = 4\n",
			`task #1 "b": key "num_secondary_indexes" must be 0 to 3`},
		{"percent out of range", header + "[[task]]\nname = \"b\"\nduration = \"1s\"\npercent_compressible = 101\n",
			`key "percent_compressible" must be 0 to 100`},
		{"too many placeholders", header + "[[task]]\nname = \"b\"\nduration = \"1s\"\nnum_char_fields = 10\nrows_per_insert = 5000\n",
			`key "rows_per_insert" times 15 columns exceeds`},
		{"no end", header + "[[task]]\nname = \"c\"\n", `task #1 "c": key "duration" is required`},
		{"missing name", header + "[[task]]\nduration = \"1s\"\n", `task #1: key "name" is required`},
		{"duplicate name", header + "[[task]]\nname = \"d\"\nduration = \"1s\"\n[[task]]\nname = \"d\"\nduration = \"1s\"\n",
			`task #2 "d": name "d" is already used by task #1`},
		{"no dsn", "[[task]]\nname = \"e\"\nduration = \"1s\"\n", `task #1 "e": key "dsn" is required`},
		{"log file with a path", header + "[[task]]\nname = \"f\"\nduration = \"1s\"\nlog_file = \"../x.tsv\"\n",
			`key "log_file" must be a plain file name`},
		{"bad table name", header + "[[task]]\nname = \"g\"\nduration = \"1s\"\ntable = \"a;b\"\n",
			`key "table" must be letters`},
		{"no tasks", header, "no [[task]] entries"},
		{"unsupported driver", header + "[[task]]\nname = \"h\"\nduration = \"1s\"\ndriver = \"postgres\"\n",
			`key "driver" must be`},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			_, err := Parse(test.toml)
			if err == nil || !strings.Contains(err.Error(), test.want) {
				t.Fatalf("err = %v, want one containing %q", err, test.want)
			}
		})
	}
}

func TestDurationAcceptsSeconds(t *testing.T) {
	tasks, err := Parse("[defaults]\ndsn = \"x\"\n[[task]]\nname = \"a\"\nduration = 90\n")
	if err != nil {
		t.Fatal(err)
	}
	if tasks[0].Duration != 90*time.Second {
		t.Fatalf("duration = %v, want 1m30s", tasks[0].Duration)
	}
}

func TestSeedQueueFileAndDSNOverride(t *testing.T) {
	const dsn = "root@unix(/run/x.sock)/iibench"
	tasks, err := ParseFileWithDSN("../../examples/seed000.toml", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 6 {
		t.Fatalf("%d tasks, want seed 000's six", len(tasks))
	}
	for i, task := range tasks {
		if task.DSN != dsn {
			t.Errorf("task %s: dsn %q not overridden", task.Name, task.DSN)
		}
		load := i%2 == 0
		if load != task.CreateTable || load != (task.MaxRowsTotal == 30000000) || load != (task.WriterThreads == 16) {
			t.Errorf("task %s: create %v, rows %d, writers %d", task.Name, task.CreateTable, task.MaxRowsTotal, task.WriterThreads)
		}
		if !load && (task.QueryThreads != 8 || task.QueriesPerSecond != 300 || task.MaxRowsPerSecond != 30000 || task.Duration != 15*time.Minute) {
			t.Errorf("task %s: mixed phase %+v", task.Name, task)
		}
	}
}
