// Package csvout writes the kit's tables: comma- or tab-separated files with a header row, whose
// numbers are printed the same way everywhere so reports and plots can read any of them.
package csvout

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"
)

// Writer writes rows of a fixed set of columns.
type Writer struct {
	file    *os.File
	buffer  *bufio.Writer
	csv     *csv.Writer
	columns []string
}

// Create truncates path and writes the header. separator is ',' or '\t'.
func Create(path string, separator rune, columns []string) (*Writer, error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	writer := newWriter(file, separator, columns)
	if err := writer.writeStrings(columns); err != nil {
		file.Close()
		return nil, err
	}
	return writer, nil
}

// Append opens path for appending, writing the header only when the file is new or empty, so
// several runs can add rows to one results file. An existing file with another header is an
// error rather than a silently misaligned table.
func Append(path string, separator rune, columns []string) (*Writer, error) {
	existing, err := readHeader(path, separator)
	if err != nil {
		return nil, err
	}
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	writer := newWriter(file, separator, columns)
	if existing == nil {
		if err := writer.writeStrings(columns); err != nil {
			file.Close()
			return nil, err
		}
		return writer, nil
	}
	if len(existing) != len(columns) {
		file.Close()
		return nil, fmt.Errorf("%s: has %d columns, this tool writes %d (move the old file away)", path, len(existing), len(columns))
	}
	for i := range columns {
		if existing[i] != columns[i] {
			file.Close()
			return nil, fmt.Errorf("%s: column %d is %q, this tool writes %q (move the old file away)", path, i+1, existing[i], columns[i])
		}
	}
	return writer, nil
}

func readHeader(path string, separator rune) ([]string, error) {
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	reader := csv.NewReader(file)
	reader.Comma = separator
	header, err := reader.Read()
	if err == io.EOF {
		return nil, nil
	}
	return header, err
}

func newWriter(file *os.File, separator rune, columns []string) *Writer {
	buffer := bufio.NewWriter(file)
	writer := csv.NewWriter(buffer)
	writer.Comma = separator
	return &Writer{file: file, buffer: buffer, csv: writer, columns: columns}
}

// Write adds one row of values in column order and flushes it, so a run that is killed keeps
// every row written so far.
func (w *Writer) Write(values ...any) error {
	if len(values) != len(w.columns) {
		return fmt.Errorf("csvout: %d values for %d columns", len(values), len(w.columns))
	}
	fields := make([]string, len(values))
	for i, value := range values {
		fields[i] = Format(value)
	}
	return w.writeStrings(fields)
}

func (w *Writer) writeStrings(fields []string) error {
	if err := w.csv.Write(fields); err != nil {
		return err
	}
	w.csv.Flush()
	if err := w.csv.Error(); err != nil {
		return err
	}
	return w.buffer.Flush()
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	w.csv.Flush()
	if err := w.buffer.Flush(); err != nil {
		w.file.Close()
		return err
	}
	return w.file.Close()
}

// Format prints one value: floats with at most three decimals and no trailing zeros, so tables
// stay readable; NaN and infinities as empty fields, which readers take as "no value".
func Format(value any) string {
	switch v := value.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return ""
		}
		return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
	case time.Duration:
		return Format(v.Seconds())
	default:
		return fmt.Sprint(v)
	}
}
