package tpcc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// errRollback is New-Order's intended rollback (clause 2.4.2.3: an unused item number in 1 % of
// the transactions): the transaction is rolled back and counted as completed, not as an error.
var errRollback = errors.New("new-order rolled back on an unused item number (as specified)")

// errVanished is a Delivery that found its oldest new order gone by the time it deleted it: with
// working locks this does not happen; the transaction is rolled back and retried.
var errVanished = errors.New("delivery: the new_order row to deliver vanished")

// terminal is one connection's state: its home warehouse and district, its random source and the
// statements it prepared.
type terminal struct {
	conn       *sql.Conn
	random     *Rand
	warehouses int
	w          int
	// stockDistrict is the district Stock-Level looks at, fixed per terminal (clause 2.8.1.1).
	stockDistrict int
	statements    map[string]*sql.Stmt
}

// statementTexts are every statement the transactions run, prepared once per terminal.
var statementTexts = map[string]string{
	"no_customer":    "SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?",
	"no_district":    "SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = ? AND d_id = ? FOR UPDATE",
	"no_district_up": "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ? AND d_id = ?",
	"no_order":       "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
	"no_new_order":   "INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)",
	"no_item":        "SELECT i_price, i_name, i_data FROM item WHERE i_id = ?",
	"no_stock":       "SELECT s_quantity, s_data, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10 FROM stock WHERE s_w_id = ? AND s_i_id = ? FOR UPDATE",
	"no_stock_up":    "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ? WHERE s_w_id = ? AND s_i_id = ?",
	"no_line":        "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ? * ?, ?)",

	"pay_w_up":       "UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?",
	"pay_w":          "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse WHERE w_id = ?",
	"pay_d_up":       "UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?",
	"pay_d":          "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district WHERE d_w_id = ? AND d_id = ?",
	"c_by_name":      "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first",
	"pay_c":          "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_credit, c_credit_lim, c_discount, c_balance, c_since FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE",
	"pay_c_data":     "SELECT c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
	"pay_c_up":       "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
	"pay_c_up_data":  "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
	"pay_history":    "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
	"os_c":           "SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
	"os_order":       "SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1",
	"os_lines":       "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
	"dl_oldest":      "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ? ORDER BY no_o_id LIMIT 1 FOR UPDATE",
	"dl_delete":      "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?",
	"dl_order":       "SELECT o_c_id FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
	"dl_order_up":    "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
	"dl_lines_up":    "UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
	"dl_lines_sum":   "SELECT COALESCE(SUM(ol_amount), 0) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
	"dl_customer_up": "UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
	"sl_next":        "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?",
	"sl_count":       "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id < ? AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id AND s_quantity < ?",
}

func (t *terminal) prepare(ctx context.Context) error {
	t.statements = map[string]*sql.Stmt{}
	for name, text := range statementTexts {
		statement, err := t.conn.PrepareContext(ctx, text)
		if err != nil {
			return fmt.Errorf("preparing %s: %w", name, err)
		}
		t.statements[name] = statement
	}
	return nil
}

func (t *terminal) close() {
	for _, statement := range t.statements {
		statement.Close()
	}
}

// exec runs one of the terminal's prepared statements. Transactions are BEGIN ... COMMIT on the
// terminal's own connection, so its statements stay prepared once (database/sql's Tx would
// prepare a connection's statements again in every transaction).
func (t *terminal) exec(ctx context.Context, name string, args ...any) (sql.Result, error) {
	result, err := t.statements[name].ExecContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return result, nil
}

func (t *terminal) queryRow(ctx context.Context, name string, args []any, dest ...any) error {
	if err := t.statements[name].QueryRowContext(ctx, args...).Scan(dest...); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// drainRows reads every row of a query, so the time includes fetching the result.
func (t *terminal) drainRows(ctx context.Context, name string, args ...any) (int, error) {
	rows, err := t.statements[name].QueryContext(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	count := 0
	for rows.Next() {
		count++
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return count, fmt.Errorf("%s: %w", name, err)
	}
	return count, rows.Close()
}

// otherWarehouse is a warehouse other than w, when there is one.
func (t *terminal) otherWarehouse() int {
	if t.warehouses < 2 {
		return t.w
	}
	other := t.random.Uniform(1, t.warehouses-1)
	if other >= t.w {
		other++
	}
	return other
}

// newOrderInput is the input of one New-Order (clause 2.4.1), drawn before the transaction so a
// retry runs the same order.
type newOrderInput struct {
	d, c      int
	items     []int
	suppliers []int
	quantity  []int
	allLocal  int
}

func (t *terminal) drawNewOrder() newOrderInput {
	r := t.random
	input := newOrderInput{d: r.Uniform(1, DistrictsPerW), c: r.CustomerID(), allLocal: 1}
	count := r.Uniform(5, 15)
	rollback := r.Uniform(1, 100) == 1
	for i := 0; i < count; i++ {
		item := r.ItemID()
		if rollback && i == count-1 {
			item = Items + 1
		}
		supplier := t.w
		if t.warehouses > 1 && r.Uniform(1, 100) == 1 {
			supplier = t.otherWarehouse()
			input.allLocal = 0
		}
		input.items = append(input.items, item)
		input.suppliers = append(input.suppliers, supplier)
		input.quantity = append(input.quantity, r.Uniform(1, 10))
	}
	return input
}

func (t *terminal) newOrder(ctx context.Context, in newOrderInput) error {
	var discount, wTax, dTax string
	var last, credit string
	if err := t.queryRow(ctx, "no_customer", []any{t.w, in.d, in.c}, &discount, &last, &credit, &wTax); err != nil {
		return err
	}
	var orderID int
	if err := t.queryRow(ctx, "no_district", []any{t.w, in.d}, &orderID, &dTax); err != nil {
		return err
	}
	if _, err := t.exec(ctx, "no_district_up", t.w, in.d); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := t.exec(ctx, "no_order", orderID, in.d, t.w, in.c, now, len(in.items), in.allLocal); err != nil {
		return err
	}
	if _, err := t.exec(ctx, "no_new_order", orderID, in.d, t.w); err != nil {
		return err
	}
	for i, item := range in.items {
		var price, name, itemData string
		if err := t.queryRow(ctx, "no_item", []any{item}, &price, &name, &itemData); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return errRollback
			}
			return err
		}
		var quantity int
		var stockData string
		var dist [10]string
		dest := []any{&quantity, &stockData}
		for j := range dist {
			dest = append(dest, &dist[j])
		}
		if err := t.queryRow(ctx, "no_stock", []any{in.suppliers[i], item}, dest...); err != nil {
			return err
		}
		remote := 0
		if in.suppliers[i] != t.w {
			remote = 1
		}
		if _, err := t.exec(ctx, "no_stock_up", NewStockQuantity(quantity, in.quantity[i]), in.quantity[i], remote, in.suppliers[i], item); err != nil {
			return err
		}
		_ = BrandGeneric(itemData, stockData) // shown to the terminal user; no table holds it
		if _, err := t.exec(ctx, "no_line", orderID, in.d, t.w, i+1, item, in.suppliers[i], in.quantity[i],
			in.quantity[i], price, dist[in.d-1]); err != nil {
			return err
		}
	}
	return nil
}

// customerInput selects a customer by id or by last name (clause 2.5.1.2 and 2.6.1.2).
type customerInput struct {
	w, d   int
	id     int
	byName bool
	last   string
}

func (t *terminal) drawCustomer(w, d int) customerInput {
	input := customerInput{w: w, d: d}
	if t.random.Uniform(1, 100) <= 60 {
		input.byName = true
		input.last = LastName(t.random.LastNameNumber())
	} else {
		input.id = t.random.CustomerID()
	}
	return input
}

// resolveCustomer returns the customer's id: for a lookup by name, the one at position
// ceil(n/2) of those with that last name sorted by first name (clause 2.5.2.2).
func (t *terminal) resolveCustomer(ctx context.Context, c customerInput) (int, error) {
	if !c.byName {
		return c.id, nil
	}
	rows, err := t.statements["c_by_name"].QueryContext(ctx, c.w, c.d, c.last)
	if err != nil {
		return 0, fmt.Errorf("c_by_name: %w", err)
	}
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return 0, fmt.Errorf("c_by_name: %w", err)
	}
	rows.Close()
	if len(ids) == 0 {
		return 0, fmt.Errorf("c_by_name: no customer named %s in district %d of warehouse %d", c.last, c.d, c.w)
	}
	return ids[MiddleIndex(len(ids))], nil
}

// MiddleIndex is the zero-based index of position ceil(n/2) of n rows.
func MiddleIndex(n int) int { return (n+1)/2 - 1 }

type paymentInput struct {
	d        int
	customer customerInput
	amount   string
}

func (t *terminal) drawPayment() paymentInput {
	r := t.random
	d := r.Uniform(1, DistrictsPerW)
	cw, cd := t.w, d
	if t.warehouses > 1 && r.Uniform(1, 100) > 85 {
		cw, cd = t.otherWarehouse(), r.Uniform(1, DistrictsPerW)
	}
	return paymentInput{d: d, customer: t.drawCustomer(cw, cd), amount: r.Money(100, 500000)}
}

func (t *terminal) payment(ctx context.Context, in paymentInput) error {
	if _, err := t.exec(ctx, "pay_w_up", in.amount, t.w); err != nil {
		return err
	}
	var wName, dName string
	var s1, s2, city, state, zip string
	if err := t.queryRow(ctx, "pay_w", []any{t.w}, &wName, &s1, &s2, &city, &state, &zip); err != nil {
		return err
	}
	if _, err := t.exec(ctx, "pay_d_up", in.amount, t.w, in.d); err != nil {
		return err
	}
	if err := t.queryRow(ctx, "pay_d", []any{t.w, in.d}, &dName, &s1, &s2, &city, &state, &zip); err != nil {
		return err
	}
	c := in.customer
	id, err := t.resolveCustomer(ctx, c)
	if err != nil {
		return err
	}
	var first, middle, last, phone, credit, creditLimit, discount, balance string
	var since sql.NullTime
	if err := t.queryRow(ctx, "pay_c", []any{c.w, c.d, id}, &first, &middle, &last, &s1, &s2, &city, &state, &zip,
		&phone, &credit, &creditLimit, &discount, &balance, &since); err != nil {
		return err
	}
	if credit == "BC" {
		var data string
		if err := t.queryRow(ctx, "pay_c_data", []any{c.w, c.d, id}, &data); err != nil {
			return err
		}
		data = BadCreditData(id, c.d, c.w, in.d, t.w, in.amount, data)
		if _, err := t.exec(ctx, "pay_c_up_data", in.amount, in.amount, data, c.w, c.d, id); err != nil {
			return err
		}
	} else if _, err := t.exec(ctx, "pay_c_up", in.amount, in.amount, c.w, c.d, id); err != nil {
		return err
	}
	historyData := wName + "    " + dName
	if len(historyData) > 24 {
		historyData = historyData[:24]
	}
	_, err = t.exec(ctx, "pay_history", id, c.d, c.w, in.d, t.w, time.Now().UTC().Truncate(time.Second), in.amount, historyData)
	return err
}

func (t *terminal) orderStatus(ctx context.Context, c customerInput) error {
	id, err := t.resolveCustomer(ctx, c)
	if err != nil {
		return err
	}
	var balance, first, middle, last string
	if err := t.queryRow(ctx, "os_c", []any{c.w, c.d, id}, &balance, &first, &middle, &last); err != nil {
		return err
	}
	var orderID int
	var carrier sql.NullInt64
	var entered sql.NullTime
	err = t.queryRow(ctx, "os_order", []any{c.w, c.d, id}, &orderID, &carrier, &entered)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = t.drainRows(ctx, "os_lines", c.w, c.d, orderID)
	return err
}

// delivery delivers the oldest undelivered order of each district of the warehouse in one
// transaction, as HammerDB does (clause 2.7.4 allows up to ten).
func (t *terminal) delivery(ctx context.Context, carrier int) (int, error) {
	delivered := 0
	now := time.Now().UTC().Truncate(time.Second)
	for d := 1; d <= DistrictsPerW; d++ {
		var orderID int
		err := t.queryRow(ctx, "dl_oldest", []any{t.w, d}, &orderID)
		if errors.Is(err, sql.ErrNoRows) {
			continue // clause 2.7.4.2: a district without undelivered orders is skipped
		}
		if err != nil {
			return delivered, err
		}
		result, err := t.exec(ctx, "dl_delete", t.w, d, orderID)
		if err != nil {
			return delivered, err
		}
		if affected, err := result.RowsAffected(); err != nil || affected != 1 {
			return delivered, errVanished
		}
		var customer int
		if err := t.queryRow(ctx, "dl_order", []any{t.w, d, orderID}, &customer); err != nil {
			return delivered, err
		}
		if _, err := t.exec(ctx, "dl_order_up", carrier, t.w, d, orderID); err != nil {
			return delivered, err
		}
		if _, err := t.exec(ctx, "dl_lines_up", now, t.w, d, orderID); err != nil {
			return delivered, err
		}
		var total string
		if err := t.queryRow(ctx, "dl_lines_sum", []any{t.w, d, orderID}, &total); err != nil {
			return delivered, err
		}
		if _, err := t.exec(ctx, "dl_customer_up", total, t.w, d, customer); err != nil {
			return delivered, err
		}
		delivered++
	}
	return delivered, nil
}

func (t *terminal) stockLevel(ctx context.Context, threshold int) error {
	var next int
	if err := t.queryRow(ctx, "sl_next", []any{t.w, t.stockDistrict}, &next); err != nil {
		return err
	}
	var low int
	return t.queryRow(ctx, "sl_count", []any{t.w, t.stockDistrict, next, next - 20, t.w, threshold}, &low)
}
