package tpcc

import (
	"math/rand"
	"strings"
	"testing"
)

func TestLastName(t *testing.T) {
	// Clause 4.3.2.3's own examples, plus the ends of the range.
	tests := []struct {
		number int
		want   string
	}{
		{371, "PRICALLYOUGHT"},
		{40, "BARPRESBAR"},
		{0, "BARBARBAR"},
		{999, "EINGEINGEING"},
		{123, "OUGHTABLEPRI"},
	}
	for _, test := range tests {
		if got := LastName(test.number); got != test.want {
			t.Errorf("LastName(%d) = %s, want %s", test.number, got, test.want)
		}
	}
}

func TestValidRunDelta(t *testing.T) {
	tests := []struct {
		run, load int
		want      bool
	}{
		{157 + 65, 157, true},
		{157 - 65, 157, true},
		{157 + 64, 157, false},
		{157 + 119, 157, true},
		{157 + 120, 157, false},
		{157 + 96, 157, false},
		{157 - 112, 157, false},
		{157 + 100, 157, true},
		{157, 157, false},
	}
	for _, test := range tests {
		if got := ValidRunDelta(test.run, test.load); got != test.want {
			t.Errorf("ValidRunDelta(%d, %d) = %v, want %v", test.run, test.load, got, test.want)
		}
	}
	random := rand.New(rand.NewSource(1))
	for i := 0; i < 1000; i++ {
		c := CRunLastName(random, CLoadLastName)
		if c < 0 || c > 255 || !ValidRunDelta(c, CLoadLastName) {
			t.Fatalf("CRunLastName drew %d, which breaks the delta rule against %d", c, CLoadLastName)
		}
	}
}

func TestNURandRangeAndSkew(t *testing.T) {
	tests := []struct {
		name       string
		a, x, y, c int
	}{
		{"customer id", aCustomerID, 1, CustomersPerDistrict, 259},
		{"item id", aItemID, 1, Items, 7911},
		{"last name", aLastName, 0, 999, 157},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			random := rand.New(rand.NewSource(42))
			counts := map[int]int{}
			const draws = 200000
			for i := 0; i < draws; i++ {
				v := NURand(random, test.a, test.x, test.y, test.c)
				if v < test.x || v > test.y {
					t.Fatalf("NURand = %d, outside [%d, %d]", v, test.x, test.y)
				}
				counts[v]++
			}
			// Non-uniform: the most frequent value is drawn far more often than a uniform
			// draw would give it (draws / range), because OR-ing sets bits.
			most := 0
			for _, n := range counts {
				most = max(most, n)
			}
			uniform := float64(draws) / float64(test.y-test.x+1)
			if float64(most) < 3*uniform {
				t.Errorf("most frequent value drawn %d times, uniform would be %.1f: not skewed", most, uniform)
			}
		})
	}
}

func TestStringGenerators(t *testing.T) {
	r := NewRand(7, true)
	for i := 0; i < 2000; i++ {
		if s := r.AString(8, 16); len(s) < 8 || len(s) > 16 {
			t.Fatalf("AString(8, 16) has length %d", len(s))
		}
		if s := r.NString(16, 16); len(s) != 16 || strings.Trim(s, "0123456789") != "" {
			t.Fatalf("NString(16, 16) = %q", s)
		}
		if z := r.Zip(); len(z) != 9 || !strings.HasSuffix(z, "11111") {
			t.Fatalf("Zip = %q", z)
		}
	}
	original := 0
	const draws = 20000
	for i := 0; i < draws; i++ {
		data := r.Data()
		if len(data) < 26 || len(data) > 50 {
			t.Fatalf("Data has length %d", len(data))
		}
		if strings.Contains(data, "ORIGINAL") {
			original++
		}
	}
	if share := float64(original) / draws; share < 0.09 || share > 0.11 {
		t.Errorf("%.3f of the data strings hold ORIGINAL, want about 0.10", share)
	}
}

func TestMoneyAndFractions(t *testing.T) {
	tests := []struct {
		cents int64
		want  string
	}{
		{0, "0.00"}, {5, "0.05"}, {1000, "10.00"}, {-1000, "-10.00"}, {123456, "1234.56"}, {-7, "-0.07"},
	}
	for _, test := range tests {
		if got := Cents(test.cents); got != test.want {
			t.Errorf("Cents(%d) = %s, want %s", test.cents, got, test.want)
		}
	}
	r := NewRand(3, false)
	for i := 0; i < 1000; i++ {
		if f := r.Fraction(0, 2000); !strings.HasPrefix(f, "0.") || len(f) != 6 || f > "0.2000" {
			t.Fatalf("Fraction(0, 2000) = %s", f)
		}
	}
}

func TestPermutation(t *testing.T) {
	r := NewRand(11, true)
	values := r.Permutation(OrdersPerDistrict)
	seen := make([]bool, OrdersPerDistrict+1)
	for _, v := range values {
		if v < 1 || v > OrdersPerDistrict || seen[v] {
			t.Fatalf("value %d out of range or repeated", v)
		}
		seen[v] = true
	}
}

func TestDeckMix(t *testing.T) {
	deck := NewDeck(rand.New(rand.NewSource(5)))
	counts := map[Kind]int{}
	const decks = 1000
	for i := 0; i < 23*decks; i++ {
		counts[deck.Next()]++
	}
	// Every full deck holds exactly 10, 10, 1, 1, 1 cards.
	want := map[Kind]int{NewOrder: 10 * decks, Payment: 10 * decks, OrderStatus: decks, Delivery: decks, StockLevel: decks}
	for kind, n := range want {
		if counts[kind] != n {
			t.Errorf("%s dealt %d times, want %d", kind, counts[kind], n)
		}
	}
	// Clause 5.2.3's minimums.
	total := float64(23 * decks)
	minimums := map[Kind]float64{Payment: 0.43, OrderStatus: 0.04, Delivery: 0.04, StockLevel: 0.04}
	for kind, minimum := range minimums {
		if share := float64(counts[kind]) / total; share < minimum {
			t.Errorf("%s is %.3f of the mix, below the minimum %.2f", kind, share, minimum)
		}
	}
}

func TestNewStockQuantity(t *testing.T) {
	tests := []struct{ current, ordered, want int }{
		{50, 5, 45},
		{15, 5, 10},
		{14, 5, 100},
		{10, 10, 91},
		{11, 1, 10},
	}
	for _, test := range tests {
		if got := NewStockQuantity(test.current, test.ordered); got != test.want {
			t.Errorf("NewStockQuantity(%d, %d) = %d, want %d", test.current, test.ordered, got, test.want)
		}
	}
}

func TestBadCreditDataAndBrand(t *testing.T) {
	data := BadCreditData(12, 3, 1, 4, 2, "100.50", strings.Repeat("x", 500))
	if len(data) != 500 || !strings.HasPrefix(data, "12 3 1 4 2 100.50|x") {
		t.Errorf("BadCreditData = %q (length %d)", data[:30], len(data))
	}
	short := BadCreditData(1, 1, 1, 1, 1, "1.00", "old")
	if short != "1 1 1 1 1 1.00|old" {
		t.Errorf("BadCreditData = %q", short)
	}
	tests := []struct{ item, stock, want string }{
		{"aORIGINALb", "ORIGINAL", "B"},
		{"aORIGINALb", "plain", "G"},
		{"plain", "xxORIGINAL", "G"},
	}
	for _, test := range tests {
		if got := BrandGeneric(test.item, test.stock); got != test.want {
			t.Errorf("BrandGeneric(%q, %q) = %s, want %s", test.item, test.stock, got, test.want)
		}
	}
}

func TestMiddleIndex(t *testing.T) {
	// Position ceil(n/2), one-based, as a zero-based index.
	tests := []struct{ n, want int }{{1, 0}, {2, 0}, {3, 1}, {4, 1}, {5, 2}}
	for _, test := range tests {
		if got := MiddleIndex(test.n); got != test.want {
			t.Errorf("MiddleIndex(%d) = %d, want %d", test.n, got, test.want)
		}
	}
}

func TestSchemaShapes(t *testing.T) {
	if len(Tables) != 9 {
		t.Fatalf("%d tables, want 9", len(Tables))
	}
	for _, table := range Tables {
		create := table.CreateSQL("ENGINE=InnoDB")
		for _, column := range table.Columns {
			if !strings.Contains(create, column+" ") {
				t.Errorf("%s: loader column %s is not in the DDL", table.Name, column)
			}
		}
		if !strings.HasSuffix(create, ") ENGINE=InnoDB") {
			t.Errorf("%s: table options missing: %s", table.Name, create)
		}
		insert := table.InsertSQL(3)
		if got := strings.Count(insert, "?"); got != 3*len(table.Columns) {
			t.Errorf("%s: %d placeholders for 3 rows of %d columns", table.Name, got, len(table.Columns))
		}
		if (table.Name == "history") == strings.Contains(create, "PRIMARY KEY") {
			t.Errorf("%s: only history goes without a primary key", table.Name)
		}
	}
}
