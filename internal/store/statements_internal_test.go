package store

import (
	"testing"
	"time"
)

// The form of the server-side limit per server flavour and statement (the statements
// themselves run against MariaDB in statements_test.go; MySQL's form has no server here).
func TestLimitStatement(t *testing.T) {
	d := 1234 * time.Millisecond
	for _, c := range []struct {
		query   string
		mariaDB bool
		want    string
	}{
		{"SELECT `shops`.`id` FROM `shops`", true, "SET STATEMENT max_statement_time=1.234 FOR SELECT `shops`.`id` FROM `shops`"},
		{"\n  update t SET a = 1", true, "SET STATEMENT max_statement_time=1.234 FOR \n  update t SET a = 1"},
		{"INSERT INTO t VALUES (?)", true, "SET STATEMENT max_statement_time=1.234 FOR INSERT INTO t VALUES (?)"},
		{"SELECT GET_LOCK(?, 120)", true, "SET STATEMENT max_statement_time=1.234 FOR SELECT GET_LOCK(?, 120)"},
		{"SET NAMES utf8mb4", true, "SET NAMES utf8mb4"},
		{"KILL 42", true, "KILL 42"},
		{"SELECT(1)", true, "SET STATEMENT max_statement_time=1.234 FOR SELECT(1)"},
		{"SELECT `id` FROM `shops`", false, "SELECT /*+ MAX_EXECUTION_TIME(1234) */ `id` FROM `shops`"},
		{" select 1", false, "SELECT /*+ MAX_EXECUTION_TIME(1234) */ 1"},
		{"UPDATE t SET a = 1", false, "UPDATE t SET a = 1"},
	} {
		if got := limitStatement(c.query, d, c.mariaDB); got != c.want {
			t.Errorf("limitStatement(%q, mariaDB %v) = %q, want %q", c.query, c.mariaDB, got, c.want)
		}
	}
	if got := limitStatement("SELECT 1", 300*time.Microsecond, true); got != "SET STATEMENT max_statement_time=0.001 FOR SELECT 1" {
		t.Errorf("a limit under 1 ms: %q", got)
	}
}
