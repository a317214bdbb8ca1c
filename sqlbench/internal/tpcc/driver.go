package tpcc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"riptide/sqlbench/internal/dbutil"
	"riptide/sqlbench/internal/latency"
	"riptide/sqlbench/internal/mysqlerr"
)

// RunOptions control a measured run.
type RunOptions struct {
	DSN         string
	Connections int
	// Warehouses is taken from the warehouse table when zero.
	Warehouses  int
	Rampup      time.Duration
	Duration    time.Duration
	ReportEvery time.Duration
	// MaxRetries bounds how often a transaction that hit a deadlock or lock wait timeout is run
	// again before it counts as failed.
	MaxRetries int
	Seed       int64
	Progress   io.Writer
}

// KindResult is one transaction kind's outcome over the measured phase.
type KindResult struct {
	Kind      string
	Completed int64
	// Rollbacks are New-Order's specified 1 % rollbacks (included in Completed).
	Rollbacks int64
	Retries   int64
	Failed    int64
	Latency   latency.Summary
}

// Sample is one report interval of the measured phase (ramp-up excluded).
type Sample struct {
	ElapsedSeconds float64
	NOPM           float64
	TPM            float64
	Retries        int64
	Failed         int64
}

// RunResult is a whole run.
type RunResult struct {
	Warehouses  int
	Connections int
	Seconds     float64
	// NOPM is New-Orders per minute from the districts' D_NEXT_O_ID, as HammerDB computes it.
	NOPM float64
	// TPM is the server's committed plus rolled-back transactions per minute (Com_commit +
	// Com_rollback), as HammerDB reports MariaDB's; ClientTPM counts the driver's own completed
	// transactions.
	TPM        float64
	ClientTPM  float64
	Kinds      []KindResult
	Samples    []Sample
	ErrorCodes map[string]int64
}

type kindCounters struct {
	completed, rollbacks, retries, failed atomic.Int64
	latency                               *latency.Recorder
}

type runState struct {
	measuring  atomic.Bool
	kinds      [5]kindCounters
	newOrders  atomic.Int64
	mu         sync.Mutex
	errorCodes map[string]int64
}

func (s *runState) countError(err error) {
	s.mu.Lock()
	s.errorCodes[errorCode(err)]++
	s.mu.Unlock()
}

func errorCode(err error) string {
	switch {
	case errors.Is(err, errVanished):
		return "vanished_new_order"
	default:
		return mysqlerr.Code(err)
	}
}

// Run drives opts.Connections terminals through the mix for the ramp-up and then the measured
// duration.
func Run(ctx context.Context, opts RunOptions) (RunResult, error) {
	if opts.Connections < 1 {
		return RunResult{}, fmt.Errorf("--connections must be at least 1")
	}
	if opts.Duration <= 0 {
		return RunResult{}, fmt.Errorf("--duration must be positive")
	}
	if opts.ReportEvery <= 0 {
		opts.ReportEvery = 10 * time.Second
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 100
	}
	db, err := dbutil.Open(opts.DSN, opts.Connections+2)
	if err != nil {
		return RunResult{}, err
	}
	defer db.Close()
	if opts.Warehouses == 0 {
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM warehouse").Scan(&opts.Warehouses); err != nil {
			return RunResult{}, fmt.Errorf("counting warehouses (run `tpcc load` first): %w", err)
		}
		if opts.Warehouses == 0 {
			return RunResult{}, fmt.Errorf("the warehouse table is empty: run `tpcc load` first")
		}
	}
	state := &runState{errorCodes: map[string]int64{}}
	for i := range state.kinds {
		state.kinds[i].latency = latency.NewRecorder()
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var group sync.WaitGroup
	errs := make(chan error, opts.Connections)
	for i := 0; i < opts.Connections; i++ {
		group.Add(1)
		go func(i int) {
			defer group.Done()
			if err := terminalLoop(runCtx, db, state, opts, i); err != nil {
				errs <- err
				cancel()
			}
		}(i)
	}

	var result RunResult
	result.Warehouses, result.Connections = opts.Warehouses, opts.Connections
	if opts.Rampup > 0 {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "tpcc: ramp-up %s with %d connections on %d warehouses\n", opts.Rampup, opts.Connections, opts.Warehouses)
		}
		select {
		case <-runCtx.Done():
		case <-time.After(opts.Rampup):
		}
	}
	startNewOrders, err1 := sumNextOrderIDs(ctx, db)
	startTransactions, err2 := serverTransactions(ctx, db)
	if err := errors.Join(err1, err2); err != nil {
		cancel()
		group.Wait()
		return result, err
	}
	state.measuring.Store(true)
	start := time.Now()
	ticker := time.NewTicker(opts.ReportEvery)
	defer ticker.Stop()
	deadline := time.NewTimer(opts.Duration)
	defer deadline.Stop()
	lastAt, lastNewOrders, lastTransactions := start, int64(0), int64(0)
	var lastRetries, lastFailed int64
	sample := func(now time.Time) {
		minutes := now.Sub(lastAt).Minutes()
		if minutes <= 0 {
			return
		}
		newOrders := state.newOrders.Load()
		var transactions, retries, failed int64
		for i := range state.kinds {
			transactions += state.kinds[i].completed.Load()
			retries += state.kinds[i].retries.Load()
			failed += state.kinds[i].failed.Load()
		}
		s := Sample{
			ElapsedSeconds: now.Sub(start).Seconds(),
			NOPM:           float64(newOrders-lastNewOrders) / minutes,
			TPM:            float64(transactions-lastTransactions) / minutes,
			Retries:        retries - lastRetries,
			Failed:         failed - lastFailed,
		}
		result.Samples = append(result.Samples, s)
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "tpcc: %4.0fs  NOPM %8.0f  TPM %8.0f  retries %d  failed %d\n",
				s.ElapsedSeconds, s.NOPM, s.TPM, s.Retries, s.Failed)
		}
		lastAt, lastNewOrders, lastTransactions, lastRetries, lastFailed = now, newOrders, transactions, retries, failed
	}
loop:
	for {
		select {
		case now := <-ticker.C:
			sample(now)
		case <-deadline.C:
			break loop
		case <-runCtx.Done():
			break loop
		}
	}
	end := time.Now()
	state.measuring.Store(false)
	if end.Sub(lastAt) >= opts.ReportEvery/10 {
		sample(end)
	}
	// An interrupted run still reads the counters: it ends with what it measured.
	final, cancelFinal := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelFinal()
	endNewOrders, err1 := sumNextOrderIDs(final, db)
	endTransactions, err2 := serverTransactions(final, db)
	cancel()
	group.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return result, err
	}
	if err := errors.Join(err1, err2); err != nil {
		return result, err
	}
	result.Seconds = end.Sub(start).Seconds()
	minutes := result.Seconds / 60
	result.NOPM = float64(endNewOrders-startNewOrders) / minutes
	result.TPM = float64(endTransactions-startTransactions) / minutes
	var completed int64
	for i, kind := range Kinds {
		counters := &state.kinds[i]
		k := KindResult{Kind: kind.String(), Completed: counters.completed.Load(), Rollbacks: counters.rollbacks.Load(),
			Retries: counters.retries.Load(), Failed: counters.failed.Load(), Latency: counters.latency.Total()}
		completed += k.Completed
		result.Kinds = append(result.Kinds, k)
	}
	result.ClientTPM = float64(completed) / minutes
	result.ErrorCodes = state.errorCodes
	return result, ctx.Err()
}

func sumNextOrderIDs(ctx context.Context, db *sql.DB) (int64, error) {
	var sum int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(d_next_o_id), 0) FROM district").Scan(&sum); err != nil {
		return 0, fmt.Errorf("summing d_next_o_id: %w", err)
	}
	return sum, nil
}

// serverTransactions is Com_commit + Com_rollback, HammerDB's transaction counter for MariaDB.
func serverTransactions(ctx context.Context, db *sql.DB) (int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')")
	if err != nil {
		return 0, fmt.Errorf("reading Com_commit: %w", err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var name string
		var value int64
		if err := rows.Scan(&name, &value); err != nil {
			return 0, err
		}
		total += value
	}
	return total, rows.Err()
}

// terminalLoop is one connection: home warehouse by its number, transactions dealt from the
// deck back to back (no keying or think time).
func terminalLoop(ctx context.Context, db *sql.DB, state *runState, opts RunOptions, index int) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return ignoreCancel(ctx, fmt.Errorf("terminal %d: connecting: %w", index, err))
	}
	defer conn.Close()
	t := &terminal{
		conn:          conn,
		random:        NewRand(opts.Seed+time.Now().UnixNano()+int64(index)*7919, false),
		warehouses:    opts.Warehouses,
		w:             index%opts.Warehouses + 1,
		stockDistrict: (index/opts.Warehouses)%DistrictsPerW + 1,
	}
	if err := t.prepare(ctx); err != nil {
		return ignoreCancel(ctx, fmt.Errorf("terminal %d: %w", index, err))
	}
	defer t.close()
	deck := NewDeck(t.random.Rand)
	for ctx.Err() == nil {
		kind := deck.Next()
		var body func(context.Context) error
		switch kind {
		case NewOrder:
			input := t.drawNewOrder()
			body = func(ctx context.Context) error { return t.newOrder(ctx, input) }
		case Payment:
			input := t.drawPayment()
			body = func(ctx context.Context) error { return t.payment(ctx, input) }
		case OrderStatus:
			input := t.drawCustomer(t.w, t.random.Uniform(1, DistrictsPerW))
			body = func(ctx context.Context) error { return t.orderStatus(ctx, input) }
		case Delivery:
			carrier := t.random.Uniform(1, 10)
			body = func(ctx context.Context) error { _, err := t.delivery(ctx, carrier); return err }
		case StockLevel:
			threshold := t.random.Uniform(10, 20)
			body = func(ctx context.Context) error { return t.stockLevel(ctx, threshold) }
		}
		if err := runTransaction(ctx, conn, state, kind, body, opts.MaxRetries); err != nil {
			return ignoreCancel(ctx, fmt.Errorf("terminal %d: %s: %w", index, kind, err))
		}
	}
	return nil
}

// runTransaction runs body in a transaction until it commits, rolls back as specified, or fails
// with an error that is not a deadlock or lock wait timeout; those are retried (and counted) up to
// maxRetries times. The latency recorded spans every attempt. Errors that end the run are
// returned; a transaction that ran out of retries is counted as failed.
func runTransaction(ctx context.Context, conn *sql.Conn, state *runState, kind Kind, body func(context.Context) error, maxRetries int) error {
	counters := &state.kinds[kind]
	began := time.Now()
	// A transaction that started is finished even when the run ends meanwhile, so the server
	// never sees half a transaction abandoned by a cancelled context.
	work := context.WithoutCancel(ctx)
	for attempt := 0; ; attempt++ {
		_, err := conn.ExecContext(work, "BEGIN")
		if err != nil {
			return err
		}
		err = body(work)
		if err == nil {
			_, err = conn.ExecContext(work, "COMMIT")
			if err == nil {
				if state.measuring.Load() {
					counters.completed.Add(1)
					counters.latency.Record(time.Since(began))
					if kind == NewOrder {
						state.newOrders.Add(1)
					}
				}
				return nil
			}
		}
		// After a failed statement or COMMIT the transaction is rolled back (a deadlock has
		// already rolled it back on the server; ROLLBACK then does nothing).
		if _, rollbackErr := conn.ExecContext(work, "ROLLBACK"); rollbackErr != nil {
			return errors.Join(err, rollbackErr)
		}
		if errors.Is(err, errRollback) {
			if state.measuring.Load() {
				counters.completed.Add(1)
				counters.rollbacks.Add(1)
				counters.latency.Record(time.Since(began))
			}
			return nil
		}
		if !mysqlerr.Retryable(err) && !errors.Is(err, errVanished) {
			return err
		}
		measuring := state.measuring.Load()
		if measuring {
			state.countError(err)
		}
		if attempt >= maxRetries {
			if measuring {
				counters.failed.Add(1)
			}
			return nil
		}
		if measuring {
			counters.retries.Add(1)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func ignoreCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// SortedCodes lists error codes by count, largest first.
func SortedCodes(codes map[string]int64) []string {
	names := make([]string, 0, len(codes))
	for name := range codes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if codes[names[i]] != codes[names[j]] {
			return codes[names[i]] > codes[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}
