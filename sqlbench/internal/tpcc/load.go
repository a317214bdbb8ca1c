package tpcc

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"riptide/sqlbench/internal/dbutil"
)

// LoadOptions control the population.
type LoadOptions struct {
	DSN          string
	Warehouses   int
	Threads      int
	TableOptions string
	// BatchRows is the number of rows of one multi-row INSERT (each its own transaction).
	BatchRows int
	Seed      int64
	Progress  io.Writer
}

// LoadResult is what a population took.
type LoadResult struct {
	Seconds float64
	Rows    int64
}

// bulk buffers rows of one table on one connection and writes them as multi-row INSERTs.
type bulk struct {
	ctx       context.Context
	conn      *sql.Conn
	table     Table
	batch     int
	statement *sql.Stmt
	args      []any
	rows      int
	written   *atomic.Int64
}

func newBulk(ctx context.Context, conn *sql.Conn, table Table, batch int, written *atomic.Int64) (*bulk, error) {
	if placeholders := batch * len(table.Columns); placeholders > 65535 {
		batch = 65535 / len(table.Columns)
	}
	statement, err := conn.PrepareContext(ctx, table.InsertSQL(batch))
	if err != nil {
		return nil, fmt.Errorf("preparing the INSERT into %s: %w", table.Name, err)
	}
	return &bulk{ctx: ctx, conn: conn, table: table, batch: batch, statement: statement,
		args: make([]any, 0, batch*len(table.Columns)), written: written}, nil
}

func (b *bulk) add(values ...any) error {
	if len(values) != len(b.table.Columns) {
		return fmt.Errorf("%s: %d values for %d columns", b.table.Name, len(values), len(b.table.Columns))
	}
	b.args = append(b.args, values...)
	b.rows++
	if b.rows == b.batch {
		if _, err := b.statement.ExecContext(b.ctx, b.args...); err != nil {
			return fmt.Errorf("inserting into %s: %w", b.table.Name, err)
		}
		b.written.Add(int64(b.rows))
		b.args, b.rows = b.args[:0], 0
	}
	return nil
}

func (b *bulk) close() error {
	defer b.statement.Close()
	if b.rows == 0 {
		return nil
	}
	if _, err := b.conn.ExecContext(b.ctx, b.table.InsertSQL(b.rows), b.args...); err != nil {
		return fmt.Errorf("inserting into %s: %w", b.table.Name, err)
	}
	b.written.Add(int64(b.rows))
	b.args, b.rows = b.args[:0], 0
	return nil
}

// Load drops and creates the nine tables and populates them for opts.Warehouses warehouses as
// clause 4.3.3.1 prescribes, with opts.Threads connections: the items are split among the threads
// first, then each thread loads whole warehouses.
func Load(ctx context.Context, opts LoadOptions) (LoadResult, error) {
	if opts.Warehouses < 1 {
		return LoadResult{}, fmt.Errorf("--warehouses must be at least 1")
	}
	if opts.Threads < 1 {
		opts.Threads = 1
	}
	if opts.BatchRows < 1 {
		opts.BatchRows = 500
	}
	if err := dbutil.EnsureDatabase(ctx, opts.DSN); err != nil {
		return LoadResult{}, err
	}
	db, err := dbutil.Open(opts.DSN, opts.Threads+1)
	if err != nil {
		return LoadResult{}, err
	}
	defer db.Close()
	started := time.Now()
	for i := len(Tables) - 1; i >= 0; i-- {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+Tables[i].Name); err != nil {
			return LoadResult{}, fmt.Errorf("dropping %s: %w", Tables[i].Name, err)
		}
	}
	for _, table := range Tables {
		if _, err := db.ExecContext(ctx, table.CreateSQL(opts.TableOptions)); err != nil {
			return LoadResult{}, fmt.Errorf("creating %s: %w", table.Name, err)
		}
	}
	var written atomic.Int64
	var done atomic.Int64
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if opts.Progress != nil {
		progressDone.Add(1)
		go func() {
			defer progressDone.Done()
			ticker := time.NewTicker(10 * time.Second)
			defer ticker.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-ticker.C:
					fmt.Fprintf(opts.Progress, "tpcc load: %.0fs, %d rows, %d of %d warehouses done\n",
						time.Since(started).Seconds(), written.Load(), done.Load(), opts.Warehouses)
				}
			}
		}()
	}
	defer func() {
		close(stopProgress)
		progressDone.Wait()
	}()

	run := func(work func(thread int, conn *sql.Conn) error) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var group sync.WaitGroup
		errs := make(chan error, opts.Threads)
		for thread := 0; thread < opts.Threads; thread++ {
			group.Add(1)
			go func(thread int) {
				defer group.Done()
				conn, err := db.Conn(ctx)
				if err == nil {
					err = work(thread, conn)
					conn.Close()
				}
				if err != nil {
					errs <- err
					cancel()
				}
			}(thread)
		}
		group.Wait()
		close(errs)
		return <-errs
	}
	// Items: each thread a slice of the id range.
	err = run(func(thread int, conn *sql.Conn) error {
		random := NewRand(opts.Seed+int64(thread)*7717+1, true)
		table, _ := TableByName("item")
		items, err := newBulk(ctx, conn, table, opts.BatchRows, &written)
		if err != nil {
			return err
		}
		for id := 1 + thread; id <= Items; id += opts.Threads {
			if err := items.add(id, random.Uniform(1, 10000), random.AString(14, 24), random.Money(100, 10000), random.Data()); err != nil {
				return err
			}
		}
		return items.close()
	})
	if err != nil {
		return LoadResult{}, err
	}
	var next atomic.Int64
	err = run(func(thread int, conn *sql.Conn) error {
		random := NewRand(opts.Seed+int64(thread)*104729+2, true)
		for {
			w := int(next.Add(1))
			if w > opts.Warehouses {
				return nil
			}
			if err := loadWarehouse(ctx, conn, random, w, opts.BatchRows, &written); err != nil {
				return fmt.Errorf("warehouse %d: %w", w, err)
			}
			done.Add(1)
		}
	})
	if err != nil {
		return LoadResult{}, err
	}
	return LoadResult{Seconds: time.Since(started).Seconds(), Rows: written.Load()}, nil
}

func loadWarehouse(ctx context.Context, conn *sql.Conn, r *Rand, w, batch int, written *atomic.Int64) error {
	open := func(name string) (*bulk, error) {
		table, _ := TableByName(name)
		return newBulk(ctx, conn, table, batch, written)
	}
	now := time.Now().UTC().Truncate(time.Second)
	warehouse, err := open("warehouse")
	if err != nil {
		return err
	}
	if err := warehouse.add(w, "300000.00", r.Fraction(0, 2000), r.AString(6, 10), r.AString(10, 20), r.AString(10, 20),
		r.AString(10, 20), r.AString(2, 2), r.Zip()); err != nil {
		return err
	}
	if err := warehouse.close(); err != nil {
		return err
	}

	stock, err := open("stock")
	if err != nil {
		return err
	}
	for i := 1; i <= Items; i++ {
		values := []any{i, w, r.Uniform(10, 100)}
		for d := 0; d < 10; d++ {
			values = append(values, r.AString(24, 24))
		}
		values = append(values, 0, 0, 0, r.Data())
		if err := stock.add(values...); err != nil {
			return err
		}
	}
	if err := stock.close(); err != nil {
		return err
	}

	district, err := open("district")
	if err != nil {
		return err
	}
	for d := 1; d <= DistrictsPerW; d++ {
		if err := district.add(d, w, "30000.00", r.Fraction(0, 2000), OrdersPerDistrict+1, r.AString(6, 10),
			r.AString(10, 20), r.AString(10, 20), r.AString(10, 20), r.AString(2, 2), r.Zip()); err != nil {
			return err
		}
	}
	if err := district.close(); err != nil {
		return err
	}

	customers, err := open("customer")
	if err != nil {
		return err
	}
	history, err := open("history")
	if err != nil {
		return err
	}
	orders, err := open("orders")
	if err != nil {
		return err
	}
	lines, err := open("order_line")
	if err != nil {
		return err
	}
	newOrders, err := open("new_order")
	if err != nil {
		return err
	}
	for d := 1; d <= DistrictsPerW; d++ {
		for c := 1; c <= CustomersPerDistrict; c++ {
			number := c - 1
			if c > 1000 {
				number = NURand(r.Rand, aLastName, 0, 999, CLoadLastName)
			}
			credit := "GC"
			if r.Intn(10) == 0 {
				credit = "BC"
			}
			if err := customers.add(c, d, w, r.AString(8, 16), "OE", LastName(number),
				r.AString(10, 20), r.AString(10, 20), r.AString(10, 20), r.AString(2, 2), r.Zip(),
				r.NString(16, 16), now, credit, "50000.00", r.Fraction(0, 5000),
				"-10.00", "10.00", 1, 0, r.AString(300, 500)); err != nil {
				return err
			}
			if err := history.add(c, d, w, d, w, now, "10.00", r.AString(12, 24)); err != nil {
				return err
			}
		}
		for o, customer := range r.Permutation(OrdersPerDistrict) {
			id := o + 1
			delivered := id < firstUndelivered
			count := r.Uniform(5, 15)
			var carrier any
			if delivered {
				carrier = r.Uniform(1, 10)
			}
			if err := orders.add(id, d, w, customer, now, carrier, count, 1); err != nil {
				return err
			}
			for number := 1; number <= count; number++ {
				var deliveredAt any
				amount := "0.00"
				if delivered {
					deliveredAt = now
				} else {
					amount = r.Money(1, 999999)
				}
				if err := lines.add(id, d, w, number, r.Uniform(1, Items), w, deliveredAt, 5, amount, r.AString(24, 24)); err != nil {
					return err
				}
			}
			if !delivered {
				if err := newOrders.add(id, d, w); err != nil {
					return err
				}
			}
		}
	}
	for _, table := range []*bulk{customers, history, orders, lines, newOrders} {
		if err := table.close(); err != nil {
			return err
		}
	}
	return nil
}
