package csvout

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		value any
		want  string
	}{
		{nil, ""},
		{"innodb", "innodb"},
		{true, "true"},
		{42, "42"},
		{int64(-7), "-7"},
		{uint64(9), "9"},
		{1.0, "1"},
		{0.12349, "0.123"},
		{1234567.891, "1234567.891"},
		{math.NaN(), ""},
		{math.Inf(1), ""},
		{1500 * time.Millisecond, "1.5"},
	}
	for _, test := range tests {
		if got := Format(test.value); got != test.want {
			t.Errorf("Format(%#v) = %q, want %q", test.value, got, test.want)
		}
	}
}

func TestCreateAndAppend(t *testing.T) {
	directory := t.TempDir()
	path := filepath.Join(directory, "results.csv")
	columns := []string{"engine", "tps"}
	tests := []struct {
		name    string
		open    func() (*Writer, error)
		row     []any
		want    string
		wantErr string
	}{
		{"create writes the header", func() (*Writer, error) { return Create(path, ',', columns) },
			[]any{"innodb", 1.5}, "engine,tps\ninnodb,1.5\n", ""},
		{"append keeps the header once", func() (*Writer, error) { return Append(path, ',', columns) },
			[]any{"rocksdb", 2}, "engine,tps\ninnodb,1.5\nrocksdb,2\n", ""},
		{"append refuses another header", func() (*Writer, error) { return Append(path, ',', []string{"engine", "qps"}) },
			nil, "", "column 2 is \"tps\""},
		{"tab separated, quoted when needed", func() (*Writer, error) {
			return Create(filepath.Join(directory, "a.tsv"), '\t', columns)
		}, []any{"a\tb", 3}, "engine\ttps\n\"a\tb\"\t3\n", ""},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			writer, err := test.open()
			if test.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), test.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, test.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := writer.Write(test.row...); err != nil {
				t.Fatal(err)
			}
			if err := writer.Close(); err != nil {
				t.Fatal(err)
			}
			written, err := os.ReadFile(writer.file.Name())
			if err != nil {
				t.Fatal(err)
			}
			if string(written) != test.want {
				t.Fatalf("file = %q, want %q", written, test.want)
			}
		})
	}
}

func TestWriteChecksTheColumnCount(t *testing.T) {
	writer, err := Create(filepath.Join(t.TempDir(), "x.csv"), ',', []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if err := writer.Write(1); err == nil {
		t.Fatal("one value for two columns was accepted")
	}
}
