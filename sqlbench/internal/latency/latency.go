// Package latency records operation latencies in HDR histograms, both for the current report
// interval and for the whole run, so a tool can print per-interval percentiles and a final summary
// from the same samples.
package latency

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The histograms hold microseconds from 1 µs to 10 minutes with three significant digits, which
// covers a sub-millisecond point query and a multi-minute stall alike.
const (
	lowestMicroseconds  = 1
	highestMicroseconds = 600_000_000
	significantDigits   = 3
)

// Summary is a latency distribution in milliseconds.
type Summary struct {
	Count  int64
	MeanMs float64
	P50Ms  float64
	P95Ms  float64
	P99Ms  float64
	P999Ms float64
	MaxMs  float64
}

// Recorder is safe for concurrent use by many workers.
type Recorder struct {
	mu       sync.Mutex
	interval *hdrhistogram.Histogram
	total    *hdrhistogram.Histogram
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		interval: hdrhistogram.New(lowestMicroseconds, highestMicroseconds, significantDigits),
		total:    hdrhistogram.New(lowestMicroseconds, highestMicroseconds, significantDigits),
	}
}

// Record adds one sample; values outside the histogram's range are clamped to it rather than
// dropped, so a pathological stall still shows up as the maximum.
func (r *Recorder) Record(elapsed time.Duration) {
	microseconds := elapsed.Microseconds()
	if microseconds < lowestMicroseconds {
		microseconds = lowestMicroseconds
	}
	if microseconds > highestMicroseconds {
		microseconds = highestMicroseconds
	}
	r.mu.Lock()
	// RecordValue only fails outside the trackable range, which the clamp above rules out.
	_ = r.interval.RecordValue(microseconds)
	_ = r.total.RecordValue(microseconds)
	r.mu.Unlock()
}

// Interval returns the distribution since the previous call (or the start) and starts a new one.
func (r *Recorder) Interval() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	summary := summarize(r.interval)
	r.interval.Reset()
	return summary
}

// Total returns the distribution of every sample recorded so far.
func (r *Recorder) Total() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return summarize(r.total)
}

func summarize(histogram *hdrhistogram.Histogram) Summary {
	count := histogram.TotalCount()
	if count == 0 {
		return Summary{}
	}
	toMilliseconds := func(microseconds int64) float64 { return float64(microseconds) / 1000 }
	return Summary{
		Count:  count,
		MeanMs: histogram.Mean() / 1000,
		P50Ms:  toMilliseconds(histogram.ValueAtQuantile(50)),
		P95Ms:  toMilliseconds(histogram.ValueAtQuantile(95)),
		P99Ms:  toMilliseconds(histogram.ValueAtQuantile(99)),
		P999Ms: toMilliseconds(histogram.ValueAtQuantile(99.9)),
		MaxMs:  toMilliseconds(histogram.Max()),
	}
}
