package tpcc

import (
	"context"
	"database/sql"
	"fmt"
)

// Condition is one of the specification's consistency conditions (clause 3.3.2), written as a
// query that returns the rows violating it (at most a few, for the message) and a count query.
type Condition struct {
	Number int
	What   string
	// Violations selects the offending rows; each row is printed as the failure's evidence.
	Violations string
	// AfterLoadOnly conditions hold right after population and not after a run.
	AfterLoadOnly bool
}

// Conditions are clause 3.3.2's twelve consistency conditions. Each query lists violations, so an
// empty result means the condition holds.
var Conditions = []Condition{
	{1, "W_YTD = sum(D_YTD) of the warehouse's districts",
		`SELECT w_id, w_ytd, s FROM warehouse JOIN (SELECT d_w_id, SUM(d_ytd) s FROM district GROUP BY d_w_id) d ON d.d_w_id = w_id
		 WHERE w_ytd <> s`, false},
	{2, "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) per district",
		`SELECT d_w_id, d_id, d_next_o_id, mo, mno FROM district
		 LEFT JOIN (SELECT o_w_id, o_d_id, MAX(o_id) mo FROM orders GROUP BY o_w_id, o_d_id) o ON o.o_w_id = d_w_id AND o.o_d_id = d_id
		 LEFT JOIN (SELECT no_w_id, no_d_id, MAX(no_o_id) mno FROM new_order GROUP BY no_w_id, no_d_id) n ON n.no_w_id = d_w_id AND n.no_d_id = d_id
		 WHERE mo IS NULL OR d_next_o_id - 1 <> mo OR (mno IS NOT NULL AND d_next_o_id - 1 <> mno)`, false},
	{3, "max(NO_O_ID) - min(NO_O_ID) + 1 = the number of new orders per district",
		`SELECT no_w_id, no_d_id, MAX(no_o_id) - MIN(no_o_id) + 1 span, COUNT(*) n FROM new_order
		 GROUP BY no_w_id, no_d_id HAVING span <> n`, false},
	{4, "sum(O_OL_CNT) = the number of order lines per district",
		`SELECT o.o_w_id, o.o_d_id, o.s, l.n FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) s FROM orders GROUP BY o_w_id, o_d_id) o
		 LEFT JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) n FROM order_line GROUP BY ol_w_id, ol_d_id) l ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id
		 WHERE l.n IS NULL OR o.s <> l.n`, false},
	{5, "O_CARRIER_ID is null exactly for the orders that have a new-order row",
		`SELECT o_w_id, o_d_id, o_id, o_carrier_id, no_o_id FROM orders
		 LEFT JOIN new_order ON no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id
		 WHERE (o_carrier_id IS NULL) <> (no_o_id IS NOT NULL)`, false},
	{6, "O_OL_CNT = the number of the order's lines, for every order",
		`SELECT o_w_id, o_d_id, o_id, o_ol_cnt, COUNT(ol_o_id) n FROM orders
		 LEFT JOIN order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id
		 GROUP BY o_w_id, o_d_id, o_id, o_ol_cnt HAVING o_ol_cnt <> n`, false},
	{7, "OL_DELIVERY_D is null exactly when the order's O_CARRIER_ID is null",
		`SELECT ol_w_id, ol_d_id, ol_o_id, ol_number, ol_delivery_d, o_carrier_id FROM order_line
		 JOIN orders ON o_w_id = ol_w_id AND o_d_id = ol_d_id AND o_id = ol_o_id
		 WHERE (ol_delivery_d IS NULL) <> (o_carrier_id IS NULL)`, false},
	{8, "W_YTD = sum(H_AMOUNT) of the warehouse's history",
		`SELECT w_id, w_ytd, s FROM warehouse LEFT JOIN (SELECT h_w_id, SUM(h_amount) s FROM history GROUP BY h_w_id) h ON h.h_w_id = w_id
		 WHERE s IS NULL OR w_ytd <> s`, false},
	{9, "D_YTD = sum(H_AMOUNT) of the district's history",
		`SELECT d_w_id, d_id, d_ytd, s FROM district LEFT JOIN (SELECT h_w_id, h_d_id, SUM(h_amount) s FROM history GROUP BY h_w_id, h_d_id) h
		 ON h.h_w_id = d_w_id AND h.h_d_id = d_id WHERE s IS NULL OR d_ytd <> s`, false},
	{10, "C_BALANCE = sum(OL_AMOUNT of delivered lines of the customer's orders) - sum(H_AMOUNT of the customer's payments)",
		`SELECT c_w_id, c_d_id, c_id, c_balance, COALESCE(ol.s, 0) delivered, COALESCE(h.s, 0) paid FROM customer
		 LEFT JOIN (SELECT o_w_id, o_d_id, o_c_id, SUM(ol_amount) s FROM orders JOIN order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id
		            WHERE ol_delivery_d IS NOT NULL GROUP BY o_w_id, o_d_id, o_c_id) ol ON ol.o_w_id = c_w_id AND ol.o_d_id = c_d_id AND ol.o_c_id = c_id
		 LEFT JOIN (SELECT h_c_w_id, h_c_d_id, h_c_id, SUM(h_amount) s FROM history GROUP BY h_c_w_id, h_c_d_id, h_c_id) h
		           ON h.h_c_w_id = c_w_id AND h.h_c_d_id = c_d_id AND h.h_c_id = c_id
		 WHERE c_balance <> COALESCE(ol.s, 0) - COALESCE(h.s, 0)`, false},
	{11, "(the number of orders) - (the number of new orders) = 2100 per district, right after population",
		`SELECT o.o_w_id, o.o_d_id, o.n, COALESCE(n.n, 0) FROM (SELECT o_w_id, o_d_id, COUNT(*) n FROM orders GROUP BY o_w_id, o_d_id) o
		 LEFT JOIN (SELECT no_w_id, no_d_id, COUNT(*) n FROM new_order GROUP BY no_w_id, no_d_id) n ON n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id
		 WHERE o.n - COALESCE(n.n, 0) <> 2100`, true},
	{12, "C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT of the customer's delivered lines)",
		`SELECT c_w_id, c_d_id, c_id, c_balance, c_ytd_payment, COALESCE(ol.s, 0) delivered FROM customer
		 LEFT JOIN (SELECT o_w_id, o_d_id, o_c_id, SUM(ol_amount) s FROM orders JOIN order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id
		            WHERE ol_delivery_d IS NOT NULL GROUP BY o_w_id, o_d_id, o_c_id) ol ON ol.o_w_id = c_w_id AND ol.o_d_id = c_d_id AND ol.o_c_id = c_id
		 WHERE c_balance + c_ytd_payment <> COALESCE(ol.s, 0)`, false},
}

// CheckResult is one condition's outcome.
type CheckResult struct {
	Condition  Condition
	Violations int
	// Examples are the first few violating rows, as text.
	Examples []string
	Skipped  bool
}

// Check runs every condition (condition 11 only when afterLoad) and returns their outcomes; an
// error means a query could not run, not that a condition failed.
func Check(ctx context.Context, db *sql.DB, afterLoad bool) ([]CheckResult, error) {
	var results []CheckResult
	for _, condition := range Conditions {
		result := CheckResult{Condition: condition}
		if condition.AfterLoadOnly && !afterLoad {
			result.Skipped = true
			results = append(results, result)
			continue
		}
		rows, err := db.QueryContext(ctx, condition.Violations)
		if err != nil {
			return results, fmt.Errorf("condition %d: %w", condition.Number, err)
		}
		columns, _ := rows.Columns()
		for rows.Next() {
			values := make([]sql.NullString, len(columns))
			pointers := make([]any, len(columns))
			for i := range values {
				pointers[i] = &values[i]
			}
			if err := rows.Scan(pointers...); err != nil {
				rows.Close()
				return results, fmt.Errorf("condition %d: %w", condition.Number, err)
			}
			result.Violations++
			if len(result.Examples) < 5 {
				text := ""
				for i, value := range values {
					if i > 0 {
						text += " "
					}
					shown := "NULL"
					if value.Valid {
						shown = value.String
					}
					text += columns[i] + "=" + shown
				}
				result.Examples = append(result.Examples, text)
			}
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return results, fmt.Errorf("condition %d: %w", condition.Number, err)
		}
		rows.Close()
		results = append(results, result)
	}
	return results, nil
}
