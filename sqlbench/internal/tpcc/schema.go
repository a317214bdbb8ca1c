package tpcc

import (
	"fmt"
	"strings"
)

// Table is one of the nine TPC-C tables: its DDL body (columns, keys and indexes as HammerDB's
// MariaDB schema has them) and the columns the loader fills, in order.
type Table struct {
	Name    string
	Body    string
	Columns []string
}

// Tables are created in this order and dropped in the reverse one.
var Tables = []Table{
	{"warehouse", `w_id INT NOT NULL,
  w_ytd DECIMAL(12,2), w_tax DECIMAL(4,4), w_name VARCHAR(10),
  w_street_1 VARCHAR(20), w_street_2 VARCHAR(20), w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9),
  PRIMARY KEY (w_id)`,
		[]string{"w_id", "w_ytd", "w_tax", "w_name", "w_street_1", "w_street_2", "w_city", "w_state", "w_zip"}},
	{"district", `d_id INT NOT NULL, d_w_id INT NOT NULL,
  d_ytd DECIMAL(12,2), d_tax DECIMAL(4,4), d_next_o_id INT, d_name VARCHAR(10),
  d_street_1 VARCHAR(20), d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9),
  PRIMARY KEY (d_w_id, d_id)`,
		[]string{"d_id", "d_w_id", "d_ytd", "d_tax", "d_next_o_id", "d_name", "d_street_1", "d_street_2", "d_city", "d_state", "d_zip"}},
	{"customer", `c_id INT NOT NULL, c_d_id INT NOT NULL, c_w_id INT NOT NULL,
  c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16),
  c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9),
  c_phone CHAR(16), c_since DATETIME, c_credit CHAR(2), c_credit_lim DECIMAL(12,2), c_discount DECIMAL(4,4),
  c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2), c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500),
  PRIMARY KEY (c_w_id, c_d_id, c_id),
  KEY c_w_id (c_w_id, c_d_id, c_last, c_first, c_id)`,
		[]string{"c_id", "c_d_id", "c_w_id", "c_first", "c_middle", "c_last", "c_street_1", "c_street_2", "c_city", "c_state", "c_zip",
			"c_phone", "c_since", "c_credit", "c_credit_lim", "c_discount", "c_balance", "c_ytd_payment", "c_payment_cnt", "c_delivery_cnt", "c_data"}},
	// History has no primary key in the specification (clause 1.3) nor in HammerDB's schema.
	{"history", `h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT, h_w_id INT,
  h_date DATETIME, h_amount DECIMAL(6,2), h_data VARCHAR(24)`,
		[]string{"h_c_id", "h_c_d_id", "h_c_w_id", "h_d_id", "h_w_id", "h_date", "h_amount", "h_data"}},
	{"new_order", `no_o_id INT NOT NULL, no_d_id INT NOT NULL, no_w_id INT NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)`,
		[]string{"no_o_id", "no_d_id", "no_w_id"}},
	{"orders", `o_id INT NOT NULL, o_d_id INT NOT NULL, o_w_id INT NOT NULL,
  o_c_id INT, o_entry_d DATETIME, o_carrier_id INT, o_ol_cnt INT, o_all_local INT,
  PRIMARY KEY (o_w_id, o_d_id, o_id),
  KEY o_w_id (o_w_id, o_d_id, o_c_id, o_id)`,
		[]string{"o_id", "o_d_id", "o_w_id", "o_c_id", "o_entry_d", "o_carrier_id", "o_ol_cnt", "o_all_local"}},
	{"order_line", `ol_o_id INT NOT NULL, ol_d_id INT NOT NULL, ol_w_id INT NOT NULL, ol_number INT NOT NULL,
  ol_i_id INT, ol_supply_w_id INT, ol_delivery_d DATETIME, ol_quantity INT, ol_amount DECIMAL(6,2), ol_dist_info CHAR(24),
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)`,
		[]string{"ol_o_id", "ol_d_id", "ol_w_id", "ol_number", "ol_i_id", "ol_supply_w_id", "ol_delivery_d", "ol_quantity", "ol_amount", "ol_dist_info"}},
	{"item", `i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2), i_data VARCHAR(50),
  PRIMARY KEY (i_id)`,
		[]string{"i_id", "i_im_id", "i_name", "i_price", "i_data"}},
	{"stock", `s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity INT,
  s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24),
  s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24),
  s_ytd DECIMAL(8,0), s_order_cnt INT, s_remote_cnt INT, s_data VARCHAR(50),
  PRIMARY KEY (s_w_id, s_i_id)`,
		[]string{"s_i_id", "s_w_id", "s_quantity", "s_dist_01", "s_dist_02", "s_dist_03", "s_dist_04", "s_dist_05",
			"s_dist_06", "s_dist_07", "s_dist_08", "s_dist_09", "s_dist_10", "s_ytd", "s_order_cnt", "s_remote_cnt", "s_data"}},
}

// TableByName finds one of Tables.
func TableByName(name string) (Table, bool) {
	for _, table := range Tables {
		if table.Name == name {
			return table, true
		}
	}
	return Table{}, false
}

// CreateSQL is a table's CREATE TABLE with the given table options (e.g. "ENGINE=RocksDB").
func (t Table) CreateSQL(options string) string {
	statement := fmt.Sprintf("CREATE TABLE %s (\n  %s\n)", t.Name, t.Body)
	if options = strings.TrimSpace(options); options != "" {
		statement += " " + options
	}
	return statement
}

// InsertSQL is a multi-row INSERT of rows rows with placeholders.
func (t Table) InsertSQL(rows int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", len(t.Columns)), ",") + ")"
	var builder strings.Builder
	fmt.Fprintf(&builder, "INSERT INTO %s (%s) VALUES ", t.Name, strings.Join(t.Columns, ","))
	for row := 0; row < rows; row++ {
		if row > 0 {
			builder.WriteByte(',')
		}
		builder.WriteString(one)
	}
	return builder.String()
}
