package patterns

import (
	"math/rand"
	"testing"
)

func TestZipfRangeAndSkew(t *testing.T) {
	tests := []struct {
		name      string
		n         int64
		theta     float64
		topShareM float64 // minimum share of draws for the most popular item
	}{
		{"1k items", 1000, 0.99, 0.10},
		{"100k items", 100000, 0.99, 0.05},
		{"mild skew", 1000, 0.5, 0.005},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			z := NewZipf(test.n, test.theta)
			random := rand.New(rand.NewSource(9))
			counts := map[int64]int{}
			scrambled := map[int64]int{}
			const draws = 200000
			for i := 0; i < draws; i++ {
				v := z.Next(random)
				if v < 0 || v >= test.n {
					t.Fatalf("Next = %d outside [0, %d)", v, test.n)
				}
				counts[v]++
				s := z.Scrambled(random)
				if s < 0 || s >= test.n {
					t.Fatalf("Scrambled = %d outside [0, %d)", s, test.n)
				}
				scrambled[s]++
			}
			if share := float64(counts[0]) / draws; share < test.topShareM {
				t.Errorf("item 0 drawn %.4f of the time, want at least %.4f", share, test.topShareM)
			}
			if counts[0] <= counts[test.n/2] {
				t.Errorf("item 0 (%d) not more popular than item n/2 (%d)", counts[0], counts[test.n/2])
			}
			most := 0
			for _, n := range scrambled {
				most = max(most, n)
			}
			if float64(most)/draws < test.topShareM/2 {
				t.Errorf("scrambled draws lost the skew: top item %.4f", float64(most)/draws)
			}
		})
	}
}

func TestPatternNames(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All {
		if seen[p.Name] {
			t.Errorf("pattern %s listed twice", p.Name)
		}
		seen[p.Name] = true
	}
	for _, name := range []string{"seq_insert", "batch_insert", "random_read", "seq_read", "random_update", "seq_update", "zipf_read", "zipf_update"} {
		if !seen[name] {
			t.Errorf("seed 003's pattern %s is missing", name)
		}
	}
	if _, err := Select("random_read,nope"); err == nil {
		t.Error("Select accepted an unknown pattern")
	}
	chosen, err := Select("zipf_update,seq_insert")
	if err != nil || len(chosen) != 2 || chosen[0].Name != "seq_insert" {
		t.Errorf("Select keeps the canonical order: %v %v", chosen, err)
	}
}
