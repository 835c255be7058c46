package e2e_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

// Issue 23, item 5: a filter on a column without an index reads the whole table, yet was
// priced as one round trip: 57 aliases of shops(first: 1, where: {nameContains}) { totalCount }
// (2.7 KB, anonymous) against 100 000 shops cost 3.4–3.8 s of MariaDB CPU and ended in
// TIMEOUT. On a private MariaDB (its CPU is the test's alone) with 100 000 shops.
func TestFilterCost(t *testing.T) {
	m := testenv.PrivateMySQL(t)
	root := m.Root(t)
	e := startWith(t, map[string]string{"SURGE_MYSQL_DSN": m.DSN}) // the defaults: budget 3000, deadline 5 s
	addShops(t, root, 100_000)

	// DB CPU of an operation, and its answer.
	cost := func(e *env, query string) (time.Duration, *result) {
		t.Helper()
		before := m.CPU()
		r := e.do("", query, nil)
		return m.CPU() - before, r
	}
	aliases := func(n int, field string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, " a%d: %s", i, strings.ReplaceAll(field, "%d", fmt.Sprint(i)))
		}
		return b.String() + " }"
	}
	const (
		counted = `shops(first: 1, where: {nameContains: "zz%d"}) { totalCount }` // the issue's
		paged   = `shops(first: 1, where: {nameContains: "zz%d"}) { edges { node { id } } }`
	)

	t.Run("priced", func(t *testing.T) {
		// One full read: a page that no row fills.
		read, r := cost(e, aliases(1, paged))
		if len(r.Errors) > 0 {
			t.Fatalf("one filtered page: %s", r.Raw)
		}
		t.Logf("one full read of 100 000 shops: %v of MariaDB CPU", read)

		// The request is refused before anything runs.
		c, r := cost(e, aliases(57, counted))
		if r.code() != "COMPLEXITY_LIMIT_EXCEEDED" || r.Status != http.StatusBadRequest {
			t.Fatalf("57 aliases of a counted nameContains: %d %s (%v of MariaDB CPU)", r.Status, tail(r.Raw, 400), c)
		}
		if !strings.Contains(r.Errors[0].Message, "full reads") {
			t.Errorf("the refusal does not say what costs: %s", r.Errors[0].Message)
		}
		if c > max(read, 50*time.Millisecond) { // nothing ran; the database's background work aside
			t.Errorf("the refused request cost %v of MariaDB CPU, one full read %v", c, read)
		}
		t.Logf("57 aliases refused: %v of MariaDB CPU; %s", c, r.Errors[0].Message)

		// The most the budget admits of either shape (the docs' bound: fewer than ten full reads), and
		// what it costs the database against the same reads sent one request each.
		for shape, most := range map[string]int{paged: 8, counted: 4} {
			n := 1
			for ; ; n++ {
				if r := e.do("", aliases(n+1, shape), nil); r.code() == "COMPLEXITY_LIMIT_EXCEEDED" {
					break
				} else if len(r.Errors) > 0 {
					t.Fatalf("%d aliases of %s: %s", n+1, shape, r.Raw)
				}
			}
			if n > most {
				t.Errorf("%d aliases of %s within the budget, want at most %d: each is a full read", n, shape, most)
			}
			var apart time.Duration
			for i := range n {
				c, _ := cost(e, aliases(1, strings.ReplaceAll(shape, "%d", fmt.Sprint(100+i))))
				apart += c
			}
			together, r := cost(e, aliases(n, shape))
			if len(r.Errors) > 0 {
				t.Fatalf("%d aliases: %s", n, r.Raw)
			}
			t.Logf("at most %d aliases of %s: %v of MariaDB CPU in one request, %v in %d requests", n, shape, together, apart, n)
			if together > 2*apart+30*time.Millisecond {
				t.Errorf("%d aliases of %s cost %v of MariaDB CPU in one request, over twice the %v of the same reads apart", n, shape, together, apart)
			}
		}
	})

}

// addShops inserts n shops of the first shop type, 1 000 a statement.
func addShops(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	start := time.Now()
	var typeID int64
	if err := db.QueryRow("SELECT MIN(id) FROM surge.shop_types").Scan(&typeID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 1000 {
		var b strings.Builder
		b.WriteString("INSERT INTO surge.shops (created_at, updated_at, name, area, address, longitude, latitude, type_id) VALUES ")
		for j := i; j < min(i+1000, n); j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(NOW(), NOW(), 'Shop %d', 'Area %d', '%d Long Street', 120.1, 30.2, %d)", j, j%97, j, typeID)
		}
		if _, err := db.Exec(b.String()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d shops inserted in %v", n, time.Since(start).Round(time.Millisecond))
}
