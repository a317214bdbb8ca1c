package iibench

import (
	"fmt"
	"math/rand"
	"strings"
	"time"
)

// The value ranges of the row generator. They follow the classic iibench: a thousand cash
// registers, a hundred thousand customers, ten thousand products and prices under 500, so the
// secondary indexes get keys spread over the whole range with many duplicates.
const (
	cashRegisters = 1000
	customers     = 100000
	products      = 10000
	maxPrice      = 500
)

// indexes are the three iibench secondary indexes, created in this order: num_secondary_indexes
// = N creates the first N.
var indexes = []struct {
	name    string
	columns string
}{
	{"marketsegment", "price, customerid"},
	{"registersegment", "cashregisterid, price, customerid"},
	{"pdc", "price, dateandtime, customerid"},
}

// CreateTableSQL is the table's DDL. dateandtime keeps microseconds (DATETIME(6)): rows of a batch
// are stamped a microsecond apart so the pdc index sees distinct keys, which a plain DATETIME would
// round back into one second.
func CreateTableSQL(task *Task) string {
	var builder strings.Builder
	fmt.Fprintf(&builder, "CREATE TABLE %s (\n", task.Table)
	builder.WriteString("  transactionid INT NOT NULL AUTO_INCREMENT,\n")
	builder.WriteString("  dateandtime DATETIME(6) NOT NULL,\n")
	builder.WriteString("  cashregisterid INT NOT NULL,\n")
	builder.WriteString("  customerid INT NOT NULL,\n")
	builder.WriteString("  productid INT NOT NULL,\n")
	builder.WriteString("  price INT NOT NULL,\n")
	for field := 1; field <= task.NumCharFields; field++ {
		fmt.Fprintf(&builder, "  charfield%d VARCHAR(%d) NOT NULL,\n", field, task.LengthCharFields)
	}
	builder.WriteString("  PRIMARY KEY (transactionid)")
	for _, index := range indexes[:task.NumSecondaryIndexes] {
		fmt.Fprintf(&builder, ",\n  KEY %s (%s)", index.name, index.columns)
	}
	builder.WriteString("\n)")
	if task.TableOptions != "" {
		builder.WriteString(" " + task.TableOptions)
	}
	return builder.String()
}

// InsertSQL is a multi-row INSERT of rows rows with placeholders.
func InsertSQL(task *Task, rows int) string {
	columns := []string{"dateandtime", "cashregisterid", "customerid", "productid", "price"}
	for field := 1; field <= task.NumCharFields; field++ {
		columns = append(columns, fmt.Sprintf("charfield%d", field))
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", len(columns)), ",") + ")"
	var builder strings.Builder
	builder.Grow(64 + len(columns)*12 + rows*(len(one)+1))
	fmt.Fprintf(&builder, "INSERT INTO %s (%s) VALUES ", task.Table, strings.Join(columns, ","))
	for row := 0; row < rows; row++ {
		if row > 0 {
			builder.WriteByte(',')
		}
		builder.WriteString(one)
	}
	return builder.String()
}

// RowGenerator makes the values of inserted rows. Each writer owns one (it is not safe for
// concurrent use), seeded differently so writers do not insert identical rows.
type RowGenerator struct {
	random           *rand.Rand
	charFields       int
	length           int
	randomLength     int
	compressibleTail string
}

// NewRowGenerator returns a generator for task's row shape.
func NewRowGenerator(task *Task, seed int64) *RowGenerator {
	// percent_compressible of each padding value is one repeated character, which compresses to
	// almost nothing; the rest is random letters, which compress only to about 4.7 bits a byte.
	compressible := task.LengthCharFields * task.PercentCompressible / 100
	return &RowGenerator{
		random:           rand.New(rand.NewSource(seed)),
		charFields:       task.NumCharFields,
		length:           task.LengthCharFields,
		randomLength:     task.LengthCharFields - compressible,
		compressibleTail: strings.Repeat("a", compressible),
	}
}

// AppendBatch appends the arguments of rows rows to args, stamping them start, start+1µs, ....
func (g *RowGenerator) AppendBatch(args []any, rows int, start time.Time) []any {
	for row := 0; row < rows; row++ {
		args = append(args,
			start.Add(time.Duration(row)*time.Microsecond),
			g.random.Intn(cashRegisters),
			g.random.Intn(customers),
			g.random.Intn(products),
			g.random.Intn(maxPrice),
		)
		for field := 0; field < g.charFields; field++ {
			args = append(args, g.CharValue())
		}
	}
	return args
}

// CharValue is one padding column's content.
func (g *RowGenerator) CharValue() string {
	buffer := make([]byte, g.randomLength, g.length)
	for i := range buffer {
		buffer[i] = byte('a' + g.random.Intn(26))
	}
	return string(append(buffer, g.compressibleTail...))
}

// QueryKind is one of the four iibench queries.
type QueryKind int

// The query kinds, in the order query threads rotate through them.
const (
	QueryPrimaryKey QueryKind = iota
	QueryPDC
	QueryMarketSegment
	QueryRegisterSegment
)

func (k QueryKind) String() string {
	return [...]string{"pk", "pdc", "marketsegment", "registersegment"}[k]
}

// QueryKinds are the kinds a task's table supports: the primary-key query always, each index
// query only when its index exists.
func QueryKinds(task *Task) []QueryKind {
	kinds := []QueryKind{QueryPrimaryKey}
	// indexes[] is in creation order: marketsegment, registersegment, pdc.
	if task.NumSecondaryIndexes >= 3 {
		kinds = append(kinds, QueryPDC)
	}
	if task.NumSecondaryIndexes >= 1 {
		kinds = append(kinds, QueryMarketSegment)
	}
	if task.NumSecondaryIndexes >= 2 {
		kinds = append(kinds, QueryRegisterSegment)
	}
	return kinds
}

// QuerySQL is the statement of a query kind. Each reads forward from a random point of its index,
// in index order, like the original: rows at the starting key past a given column, then
// everything with a larger leading key, LIMIT query_limit.
func QuerySQL(task *Task, kind QueryKind) string {
	switch kind {
	case QueryPDC:
		return fmt.Sprintf("SELECT price, dateandtime, customerid FROM %s FORCE INDEX (pdc)"+
			" WHERE (price = ? AND dateandtime = ? AND customerid >= ?) OR (price = ? AND dateandtime > ?) OR (price > ?)"+
			" ORDER BY price, dateandtime, customerid LIMIT %d", task.Table, task.QueryLimit)
	case QueryMarketSegment:
		return fmt.Sprintf("SELECT price, customerid FROM %s FORCE INDEX (marketsegment)"+
			" WHERE (price = ? AND customerid >= ?) OR (price > ?)"+
			" ORDER BY price, customerid LIMIT %d", task.Table, task.QueryLimit)
	case QueryRegisterSegment:
		return fmt.Sprintf("SELECT cashregisterid, price, customerid FROM %s FORCE INDEX (registersegment)"+
			" WHERE (cashregisterid = ? AND price = ? AND customerid >= ?) OR (cashregisterid = ? AND price > ?) OR (cashregisterid > ?)"+
			" ORDER BY cashregisterid, price, customerid LIMIT %d", task.Table, task.QueryLimit)
	default:
		return fmt.Sprintf("SELECT transactionid FROM %s WHERE transactionid >= ? ORDER BY transactionid LIMIT %d",
			task.Table, task.QueryLimit)
	}
}

// QueryArgs are random starting points for a query kind; maxID is the largest primary key
// believed to exist and since the earliest timestamp a row may carry.
func (g *RowGenerator) QueryArgs(kind QueryKind, maxID int64, since time.Time, now time.Time) []any {
	price := g.random.Intn(maxPrice)
	customer := g.random.Intn(customers)
	switch kind {
	case QueryPDC:
		span := now.Sub(since)
		if span <= 0 {
			span = time.Second
		}
		stamp := since.Add(time.Duration(g.random.Int63n(int64(span))))
		return []any{price, stamp, customer, price, stamp, price}
	case QueryMarketSegment:
		return []any{price, customer, price}
	case QueryRegisterSegment:
		register := g.random.Intn(cashRegisters)
		return []any{register, price, customer, register, price, register}
	default:
		if maxID < 1 {
			maxID = 1
		}
		return []any{1 + g.random.Int63n(maxID)}
	}
}
