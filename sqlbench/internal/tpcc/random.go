// Package tpcc is a TPC-C driver written from the public specification (TPC Benchmark C, revision
// 5.11), shaped like HammerDB's: the nine tables, a parallel loader, the five transactions at the
// standard mix without keying or think time, NOPM and TPM, and the consistency conditions.
package tpcc

import (
	"fmt"
	"math/rand"
	"strings"
)

// Cardinalities of the specification (clause 1.2 and 4.3.3.1).
const (
	Items                = 100000
	DistrictsPerW        = 10
	CustomersPerDistrict = 3000
	OrdersPerDistrict    = 3000
	// NewOrdersPerDistrict are the undelivered orders after population: the last 900.
	NewOrdersPerDistrict = 900
	// firstUndelivered is the first order id that is still undelivered after population.
	firstUndelivered = OrdersPerDistrict - NewOrdersPerDistrict + 1
)

// NURand's A constants (clause 2.1.6).
const (
	aLastName   = 255
	aCustomerID = 1023
	aItemID     = 8191
)

// CLoadLastName is the C used for customer last names during population. Clause 2.1.6 lets C be
// any run-time constant in [0, A]; it is fixed here so that a separate run process can choose its
// own C (CRunLastName) under the clause 2.1.6.1 rule without the loader having to record it.
const CLoadLastName = 157

// Rand is the random source of one loader thread or terminal; not safe for concurrent use.
type Rand struct {
	*rand.Rand
	cCustomerID int
	cItemID     int
	cLastName   int
}

// NewRand returns a generator with its own run-time constants C drawn from seed. forLoad picks
// CLoadLastName for last names; otherwise a C that satisfies the run/load delta rule.
func NewRand(seed int64, forLoad bool) *Rand {
	r := &Rand{Rand: rand.New(rand.NewSource(seed))}
	r.cCustomerID = r.Intn(aCustomerID + 1)
	r.cItemID = r.Intn(aItemID + 1)
	if forLoad {
		r.cLastName = CLoadLastName
	} else {
		r.cLastName = CRunLastName(r.Rand, CLoadLastName)
	}
	return r
}

// ValidRunDelta is clause 2.1.6.1: the C of the run differs from the C of the load by 65 to 119,
// but not by 96 or 112.
func ValidRunDelta(cRun, cLoad int) bool {
	delta := cRun - cLoad
	if delta < 0 {
		delta = -delta
	}
	return delta >= 65 && delta <= 119 && delta != 96 && delta != 112
}

// CRunLastName draws a C for last names in [0, 255] that satisfies ValidRunDelta against cLoad.
func CRunLastName(random *rand.Rand, cLoad int) int {
	var candidates []int
	for c := 0; c <= aLastName; c++ {
		if ValidRunDelta(c, cLoad) {
			candidates = append(candidates, c)
		}
	}
	return candidates[random.Intn(len(candidates))]
}

// Uniform is a uniform integer in [low, high].
func (r *Rand) Uniform(low, high int) int {
	return low + r.Intn(high-low+1)
}

// NURand is the non-uniform random function of clause 2.1.6:
// (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
func NURand(r *rand.Rand, a, x, y, c int) int {
	return (((r.Intn(a+1) | (x + r.Intn(y-x+1))) + c) % (y - x + 1)) + x
}

// CustomerID is a customer of a district for New-Order, Payment and Order-Status.
func (r *Rand) CustomerID() int {
	return NURand(r.Rand, aCustomerID, 1, CustomersPerDistrict, r.cCustomerID)
}

// ItemID is an item of a New-Order line.
func (r *Rand) ItemID() int { return NURand(r.Rand, aItemID, 1, Items, r.cItemID) }

// LastNameNumber is the number a run looks customers up by (clause 2.5.1.2).
func (r *Rand) LastNameNumber() int { return NURand(r.Rand, aLastName, 0, 999, r.cLastName) }

var syllables = [...]string{"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}

// LastName builds C_LAST from a number in [0, 999] out of three syllables (clause 4.3.2.3).
func LastName(number int) string {
	return syllables[number/100] + syllables[number/10%10] + syllables[number%10]
}

const alphanumeric = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// AString is a random alphanumeric string of a length in [low, high] (clause 4.3.2.2).
func (r *Rand) AString(low, high int) string {
	buffer := make([]byte, r.Uniform(low, high))
	for i := range buffer {
		buffer[i] = alphanumeric[r.Intn(len(alphanumeric))]
	}
	return string(buffer)
}

// NString is a random string of digits of a length in [low, high].
func (r *Rand) NString(low, high int) string {
	buffer := make([]byte, r.Uniform(low, high))
	for i := range buffer {
		buffer[i] = byte('0' + r.Intn(10))
	}
	return string(buffer)
}

// Zip is a zip code: four random digits and "11111" (clause 4.3.2.7).
func (r *Rand) Zip() string { return r.NString(4, 4) + "11111" }

// Data is I_DATA or S_DATA: a string of 26 to 50 characters, of which 10 % hold "ORIGINAL" at a
// random position (clause 4.3.3.1).
func (r *Rand) Data() string {
	data := r.AString(26, 50)
	if r.Intn(10) == 0 {
		at := r.Intn(len(data) - len("ORIGINAL") + 1)
		data = data[:at] + "ORIGINAL" + data[at+len("ORIGINAL"):]
	}
	return data
}

// Money is a random amount in [low, high] cents, as decimal text ("12.34"), so DECIMAL columns get
// exact values.
func (r *Rand) Money(lowCents, highCents int) string {
	return Cents(int64(r.Uniform(lowCents, highCents)))
}

// Cents prints an amount of cents as decimal text.
func Cents(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// Fraction is a random value in [low, high] ten-thousandths as text ("0.1234"), for taxes and
// discounts.
func (r *Rand) Fraction(low, high int) string {
	value := r.Uniform(low, high)
	return fmt.Sprintf("%d.%04d", value/10000, value%10000)
}

// Permutation is a random permutation of 1..n (O_C_ID of the initial orders).
func (r *Rand) Permutation(n int) []int {
	values := make([]int, n)
	for i, v := range r.Perm(n) {
		values[i] = v + 1
	}
	return values
}

// Kind is one of the five transactions.
type Kind int

// The transactions, in the order of the report.
const (
	NewOrder Kind = iota
	Payment
	OrderStatus
	Delivery
	StockLevel
)

// Kinds lists every transaction kind.
var Kinds = []Kind{NewOrder, Payment, OrderStatus, Delivery, StockLevel}

func (k Kind) String() string {
	return [...]string{"new_order", "payment", "order_status", "delivery", "stock_level"}[k]
}

// deckCards is the mix as a deck (clause 5.2.4.2): 10 New-Order, 10 Payment and one of each other
// kind in 23 cards, as HammerDB draws it: 43.5 % Payment and 4.3 % each of Order-Status, Delivery
// and Stock-Level meet the minimums of clause 5.2.3 (43 % and 4 %).
var deckCards = func() []Kind {
	cards := make([]Kind, 0, 23)
	for i := 0; i < 10; i++ {
		cards = append(cards, NewOrder, Payment)
	}
	return append(cards, OrderStatus, Delivery, StockLevel)
}()

// Deck deals transaction kinds from shuffled decks of the mix.
type Deck struct {
	random *rand.Rand
	cards  []Kind
	next   int
}

// NewDeck returns a deck dealt with random.
func NewDeck(random *rand.Rand) *Deck {
	return &Deck{random: random, cards: append([]Kind(nil), deckCards...), next: len(deckCards)}
}

// Next deals one card, reshuffling when the deck is used up.
func (d *Deck) Next() Kind {
	if d.next == len(d.cards) {
		d.random.Shuffle(len(d.cards), func(i, j int) { d.cards[i], d.cards[j] = d.cards[j], d.cards[i] })
		d.next = 0
	}
	card := d.cards[d.next]
	d.next++
	return card
}

// NewStockQuantity is clause 2.4.2.2's stock update: take the quantity when at least 10 are left
// after it, else restock by 91.
func NewStockQuantity(current, ordered int) int {
	if current >= ordered+10 {
		return current - ordered
	}
	return current - ordered + 91
}

// BadCreditData is C_DATA after a payment by a customer with bad credit (clause 2.5.2.2): the
// payment's ids and amount in front of the old data, cut to 500 characters.
func BadCreditData(cID, cDID, cWID, dID, wID int, amount, old string) string {
	data := fmt.Sprintf("%d %d %d %d %d %s|%s", cID, cDID, cWID, dID, wID, amount, old)
	if len(data) > 500 {
		data = data[:500]
	}
	return data
}

// BrandGeneric is clause 2.4.2.2's brand: "B" when both the item's and the stock's data hold
// "ORIGINAL", else "G".
func BrandGeneric(itemData, stockData string) string {
	if strings.Contains(itemData, "ORIGINAL") && strings.Contains(stockData, "ORIGINAL") {
		return "B"
	}
	return "G"
}
