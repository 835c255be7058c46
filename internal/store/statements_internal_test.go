package store

import (
	"context"
	"fmt"
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

// A statement drawing on a budget (budget.go) carries the budget's time left as its limit
// when that comes before its deadline, in either server's form (the MariaDB form runs against
// the server in budget_test.go).
func TestBudgetLimitsStatement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	budgeted := context.WithValue(ctx, statementLimitKey{}, 80*time.Millisecond)
	for _, c := range []struct {
		ctx     context.Context
		mariaDB bool
		want    string
	}{
		{budgeted, false, "SELECT /*+ MAX_EXECUTION_TIME(80) */ `id` FROM `shops`"},
		{budgeted, true, "SET STATEMENT max_statement_time=0.080 FOR SELECT `id` FROM `shops`"},
		{context.WithValue(context.Background(), statementLimitKey{}, 80*time.Millisecond), false, "SELECT /*+ MAX_EXECUTION_TIME(80) */ `id` FROM `shops`"},
	} {
		if got := (&boundedConn{mariaDB: c.mariaDB}).limited(c.ctx, "SELECT `id` FROM `shops`"); got != c.want {
			t.Errorf("mariaDB %v: %q, want %q", c.mariaDB, got, c.want)
		}
	}
	// A deadline nearer than the budget's time left is the limit.
	near, cancel := context.WithTimeout(context.WithValue(context.Background(), statementLimitKey{}, time.Minute), 2*time.Second)
	defer cancel()
	got := (&boundedConn{}).limited(near, "SELECT 1")
	var ms int
	if _, err := fmt.Sscanf(got, "SELECT /*+ MAX_EXECUTION_TIME(%d) */ 1", &ms); err != nil || ms < 1500 || ms > 1900 {
		t.Errorf("a 2 s deadline under a budget of a minute: %q", got)
	}
}
