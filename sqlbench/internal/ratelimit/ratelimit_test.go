package ratelimit

import (
	"context"
	"testing"
	"time"
)

// fakeClock advances only when a limiter sleeps or a test moves it, so tests run instantly and
// exactly.
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	errors error
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(_ context.Context, duration time.Duration) error {
	c.slept = append(c.slept, duration)
	c.now = c.now.Add(duration)
	return c.errors
}

func TestWindowAdmitsLimitPerSecond(t *testing.T) {
	tests := []struct {
		name         string
		limit        int64
		batch        int64
		batches      int
		wantSeconds  float64
		wantSleepCnt int
	}{
		{"unlimited never sleeps", 0, 1000, 50, 0, 0},
		{"three batches fit in one second", 3000, 1000, 3, 0, 0},
		{"the fourth batch waits for the next window", 3000, 1000, 4, 1, 1},
		{"thirty per second for three seconds", 30000, 1000, 90, 2, 2},
		{"a batch above the limit goes alone", 500, 1000, 3, 2, 2},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			clock := newFakeClock()
			start := clock.now
			window := NewWindow(test.limit, clock)
			for i := 0; i < test.batches; i++ {
				if err := window.Acquire(context.Background(), test.batch); err != nil {
					t.Fatal(err)
				}
			}
			if got := clock.now.Sub(start).Seconds(); got != test.wantSeconds {
				t.Errorf("elapsed %v s, want %v s", got, test.wantSeconds)
			}
			if len(clock.slept) != test.wantSleepCnt {
				t.Errorf("slept %d times, want %d", len(clock.slept), test.wantSleepCnt)
			}
		})
	}
}

func TestWindowDoesNotBankIdleSeconds(t *testing.T) {
	clock := newFakeClock()
	window := NewWindow(2, clock)
	clock.now = clock.now.Add(5*time.Second + 300*time.Millisecond)
	for i := 0; i < 3; i++ {
		if err := window.Acquire(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	// Two units fit in the window at 5 s; the third waits for the window at 6 s, i.e. 0.7 s.
	if len(clock.slept) != 1 || clock.slept[0] != 700*time.Millisecond {
		t.Fatalf("slept %v, want one 700ms sleep", clock.slept)
	}
}

func TestWindowStopsOnCancel(t *testing.T) {
	clock := newFakeClock()
	clock.errors = context.Canceled
	window := NewWindow(1, clock)
	if err := window.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := window.Acquire(context.Background(), 1); err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestIntervalFor(t *testing.T) {
	tests := []struct {
		perSecond float64
		workers   int
		want      time.Duration
	}{
		{300, 8, 26_666_666 * time.Nanosecond},
		{10, 1, 100 * time.Millisecond},
		{0, 8, 0},
		{100, 0, 0},
	}
	for _, test := range tests {
		if got := IntervalFor(test.perSecond, test.workers); got != test.want {
			t.Errorf("IntervalFor(%v, %d) = %v, want %v", test.perSecond, test.workers, got, test.want)
		}
	}
}

func TestPacerSpacesAndDoesNotCatchUp(t *testing.T) {
	tests := []struct {
		name string
		// work is how long each operation takes after its Wait returns.
		work      []time.Duration
		wantSleep []time.Duration
	}{
		{"fast operations sleep the rest of the slot",
			[]time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
			[]time.Duration{90 * time.Millisecond, 90 * time.Millisecond}},
		{"a slow operation is followed at once, then the schedule restarts",
			[]time.Duration{350 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
			[]time.Duration{90 * time.Millisecond}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			clock := newFakeClock()
			pacer := NewPacer(100*time.Millisecond, clock)
			for _, work := range test.work {
				if err := pacer.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				clock.now = clock.now.Add(work)
			}
			if len(clock.slept) != len(test.wantSleep) {
				t.Fatalf("slept %v, want %v", clock.slept, test.wantSleep)
			}
			for i := range clock.slept {
				if clock.slept[i] != test.wantSleep[i] {
					t.Fatalf("slept %v, want %v", clock.slept, test.wantSleep)
				}
			}
		})
	}
}
