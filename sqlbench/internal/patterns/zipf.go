// Package patterns runs seed 003's access patterns against one table: sequential and batch
// INSERT, random and sequential READ and UPDATE, zipfian READ and UPDATE, each with its latency
// distribution, then measures the table's size on disk against its logical size.
package patterns

import (
	"math"
	"math/rand"
)

// Zipf draws integers in [0, n) with YCSB's zipfian generator (Gray et al., "Quickly generating
// billion-record synthetic databases"): item i is drawn with probability proportional to
// 1/(i+1)^theta. Scrambled spreads the popular items over the key space.
type Zipf struct {
	n               int64
	theta           float64
	alpha, zetan    float64
	eta, halfPowThe float64
}

// NewZipf precomputes the generator for n items (O(n) once).
func NewZipf(n int64, theta float64) *Zipf {
	z := &Zipf{n: n, theta: theta}
	z.zetan = zeta(n, theta)
	zeta2 := zeta(2, theta)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/z.zetan)
	z.halfPowThe = 1 + math.Pow(0.5, theta)
	return z
}

func zeta(n int64, theta float64) float64 {
	sum := 0.0
	for i := int64(1); i <= n; i++ {
		sum += 1 / math.Pow(float64(i), theta)
	}
	return sum
}

// Next is an item in [0, n); 0 is the most popular.
func (z *Zipf) Next(random *rand.Rand) int64 {
	u := random.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.halfPowThe {
		return 1
	}
	value := int64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if value >= z.n {
		value = z.n - 1
	}
	return value
}

// Scrambled is Next mapped through a hash, so the hot items are not neighbours (YCSB's
// ScrambledZipfianGenerator).
func (z *Zipf) Scrambled(random *rand.Rand) int64 {
	return int64(fnv64(uint64(z.Next(random))) % uint64(z.n))
}

func fnv64(value uint64) uint64 {
	hash := uint64(0xCBF29CE484222325)
	for i := 0; i < 8; i++ {
		hash ^= value & 0xff
		hash *= 1099511628211
		value >>= 8
	}
	return hash
}
