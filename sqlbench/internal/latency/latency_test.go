package latency

import (
	"math"
	"testing"
	"time"
)

func TestRecorderPercentiles(t *testing.T) {
	tests := []struct {
		name      string
		samples   []time.Duration
		wantCount int64
		wantP50Ms float64
		wantMaxMs float64
	}{
		{"empty", nil, 0, 0, 0},
		{"one sample", []time.Duration{2 * time.Millisecond}, 1, 2, 2},
		{"below the range is clamped up", []time.Duration{100 * time.Nanosecond}, 1, 0.001, 0.001},
		{"above the range is clamped down", []time.Duration{time.Hour}, 1, 600_000, 600_000},
		{"median of 1..100 ms", millisecondsUpTo(100), 100, 50, 100},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			recorder := NewRecorder()
			for _, sample := range test.samples {
				recorder.Record(sample)
			}
			total := recorder.Total()
			if total.Count != test.wantCount {
				t.Fatalf("count = %d, want %d", total.Count, test.wantCount)
			}
			if !near(total.P50Ms, test.wantP50Ms) || !near(total.MaxMs, test.wantMaxMs) {
				t.Fatalf("p50 = %v ms, max = %v ms; want %v and %v", total.P50Ms, total.MaxMs, test.wantP50Ms, test.wantMaxMs)
			}
		})
	}
}

func TestIntervalResetsButTotalKeeps(t *testing.T) {
	recorder := NewRecorder()
	recorder.Record(time.Millisecond)
	recorder.Record(3 * time.Millisecond)
	if first := recorder.Interval(); first.Count != 2 {
		t.Fatalf("first interval count = %d, want 2", first.Count)
	}
	recorder.Record(5 * time.Millisecond)
	second := recorder.Interval()
	if second.Count != 1 || !near(second.P50Ms, 5) {
		t.Fatalf("second interval = %+v, want one 5 ms sample", second)
	}
	if total := recorder.Total(); total.Count != 3 {
		t.Fatalf("total count = %d, want 3", total.Count)
	}
}

func millisecondsUpTo(n int) []time.Duration {
	samples := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	return samples
}

// near allows the histogram's three significant digits of error.
func near(got, want float64) bool {
	return math.Abs(got-want) <= math.Max(0.001, want*0.002)
}
