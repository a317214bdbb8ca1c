// Package ratelimit paces benchmark workers: Window caps a shared total per one-second window
// (iibench's max_rows_per_second), and Pacer spaces one worker's operations evenly without
// catching up after a slow one (iibench's queries_per_second).
package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Clock lets tests drive time by hand; the zero value of the limiters uses the real clock.
type Clock interface {
	Now() time.Time
	// Sleep waits for the duration or until the context ends, whichever is first.
	Sleep(ctx context.Context, duration time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, duration time.Duration) error {
	if duration <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(duration)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// Window admits at most Limit units per one-second window, shared by every caller. Windows are
// aligned to the limiter's start, so the limit holds for each second of the run's timeline rather
// than for a sliding second, which is how the per-interval report counts them.
type Window struct {
	limit int64
	clock Clock

	mu          sync.Mutex
	start       time.Time
	windowStart time.Time
	used        int64
}

// NewWindow returns a limiter of limit units per second; a limit of zero or less means no limit.
func NewWindow(limit int64, clock Clock) *Window {
	if clock == nil {
		clock = RealClock
	}
	now := clock.Now()
	return &Window{limit: limit, clock: clock, start: now, windowStart: now}
}

// Acquire blocks until units fit into the current window and takes them. A request larger than
// the whole limit is admitted alone into an empty window, so a batch bigger than the per-second
// cap still makes progress (one batch per second) instead of blocking forever.
func (w *Window) Acquire(ctx context.Context, units int64) error {
	if w.limit <= 0 {
		return ctx.Err()
	}
	for {
		w.mu.Lock()
		now := w.clock.Now()
		if elapsed := now.Sub(w.windowStart); elapsed >= time.Second {
			// Jump to the window that holds now; the seconds skipped while nobody asked are
			// lost, not banked, so there is no burst after an idle spell.
			sinceStart := now.Sub(w.start)
			w.windowStart = w.start.Add(sinceStart.Truncate(time.Second))
			w.used = 0
		}
		if w.used+units <= w.limit || w.used == 0 {
			w.used += units
			w.mu.Unlock()
			return nil
		}
		wait := w.windowStart.Add(time.Second).Sub(now)
		w.mu.Unlock()
		if err := w.clock.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// Pacer spaces one worker's operations Interval apart. It is not safe for concurrent use: each
// worker owns one, and a total rate is spread by giving each of N workers N/rate as interval.
type Pacer struct {
	interval time.Duration
	clock    Clock
	next     time.Time
}

// NewPacer returns a pacer whose first operation may start at once; an interval of zero or less
// means no pacing.
func NewPacer(interval time.Duration, clock Clock) *Pacer {
	if clock == nil {
		clock = RealClock
	}
	return &Pacer{interval: interval, clock: clock, next: clock.Now()}
}

// IntervalFor returns the interval each of workers needs for a total rate of perSecond; zero
// when the rate is unlimited.
func IntervalFor(perSecond float64, workers int) time.Duration {
	if perSecond <= 0 || workers <= 0 {
		return 0
	}
	return time.Duration(float64(workers) / perSecond * float64(time.Second))
}

// Wait blocks until the next operation may start. When an operation overran its slot, the next
// one starts at once but the schedule restarts from now: late slots are dropped, never made up in
// a burst, so a slow query cannot make the following ones pile onto the server.
func (p *Pacer) Wait(ctx context.Context) error {
	if p.interval <= 0 {
		return ctx.Err()
	}
	now := p.clock.Now()
	if p.next.After(now) {
		if err := p.clock.Sleep(ctx, p.next.Sub(now)); err != nil {
			return err
		}
		p.next = p.next.Add(p.interval)
		return nil
	}
	p.next = now.Add(p.interval)
	return ctx.Err()
}
