package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/surgekit/surge/ent/predicate"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
)

// Issue 33, item 1: a request's statements were bounded only by its deadline (5 s), so a
// filter that reads a whole table ran for seconds, and aliases ran several at once. Under a
// budget (store.WithBudget) a request's statements run one at a time and stop, together, at
// the budget: the server's limit on MariaDB, an interruption on SQLite.
func TestBudgetBoundsARequestsStatements(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) *store.DB
		// slow is a predicate that takes about d on each row; d = 0: far longer than any budget.
		slow func(d time.Duration) predicate.ShopType
	}{
		{"MariaDB", func(t *testing.T) *store.DB {
			db := mustOpen(t)(store.OpenMySQL(testenv.MySQL(t)))
			db.SetMaxConns(testenv.MySQLConns())
			return db
		}, func(d time.Duration) predicate.ShopType {
			if d == 0 {
				d = time.Minute
			}
			return where(fmt.Sprintf("SLEEP(%.3f) = 0", d.Seconds()))
		}},
		{"SQLite", func(t *testing.T) *store.DB {
			return mustOpen(t)(store.OpenSQLite(filepath.Join(t.TempDir(), "surge.db")))
		}, func(d time.Duration) predicate.ShopType {
			n := int64(1_000_000_000) // minutes
			if d > 0 {
				n = int64(d) / int64(sqliteStep)
			}
			return where(fmt.Sprintf("(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d) SELECT COUNT(*) FROM c) > 0", n))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := c.open(t)
			ctx := context.Background()
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if err := db.Ent.ShopType.Create().SetName("food").Exec(ctx); err != nil {
				t.Fatal(err)
			}
			types := db.Ent.ShopType.Query
			if c.name == "SQLite" { // how long a step of the count takes on this machine now (with its overhead)
				start := time.Now()
				if _, err := types().Where(where("(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT COUNT(*) FROM c) > 0")).All(ctx); err != nil {
					t.Fatal(err)
				}
				sqliteStep = time.Since(start) / 1000
			}

			// A statement past the budget stops at it, and so does the request's next one, at once.
			const budget = 300 * time.Millisecond
			b := store.NewBudget(budget)
			start := time.Now()
			_, err := types().Where(c.slow(0)).All(store.WithBudget(ctx, b))
			took := time.Since(start)
			if !store.IsBudgetSpent(err) {
				t.Fatalf("a statement past the budget of %v: %v after %v", budget, err, took)
			}
			if took < budget || took > budget+time.Second {
				t.Errorf("the statement past a %v budget stopped after %v", budget, took)
			}
			start = time.Now()
			if _, err := types().All(store.WithBudget(ctx, b)); !store.IsBudgetSpent(err) || time.Since(start) > 50*time.Millisecond {
				t.Errorf("a statement of a spent budget: %v after %v", err, time.Since(start))
			}
			t.Logf("a statement past a %v budget stopped after %v: %v", budget, took.Round(time.Millisecond), err)
			// The connection it ran on still serves, without a budget.
			if n, err := types().Where(c.slow(time.Millisecond)).Count(ctx); err != nil || n != 1 {
				t.Fatalf("a statement after the cut, without a budget: %d, %v", n, err)
			}

			// Statements of one request that arrive together run one after the other, within the
			// budget: 6 statements against a budget of 2.5 of them. Without the budget's order they
			// would all run at once and end together.
			const n = 6
			start = time.Now()
			if _, err := types().Where(c.slow(150 * time.Millisecond)).All(ctx); err != nil {
				t.Fatal(err)
			}
			each := time.Since(start) // as slow as the machine is now
			together := each * 5 / 2
			b = store.NewBudget(together)
			errs := make([]error, n)
			start = time.Now()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { _, errs[i] = types().Where(c.slow(150 * time.Millisecond)).All(store.WithBudget(ctx, b)) })
			}
			wg.Wait()
			took = time.Since(start)
			done := 0
			for _, err := range errs {
				switch {
				case err == nil:
					done++
				case !store.IsBudgetSpent(err):
					t.Fatalf("a statement of the request: %v", err)
				}
			}
			if done < 1 || done > 3 || took < time.Duration(done)*each*4/5 || took > together+time.Second {
				t.Errorf("%d statements of %v each under a budget of %v: %d ran through, after %v", n, each, together, done, took)
			}
			t.Logf("%d statements of %v each under a budget of %v: %d ran through, the others stopped; %v in all",
				n, each.Round(time.Millisecond), together.Round(time.Millisecond), done, took.Round(time.Millisecond))

			// A nearer deadline is the limit then: the statement times out, the budget is not spent.
			dctx, cancel := context.WithTimeout(store.WithBudget(ctx, store.NewBudget(time.Minute)), 300*time.Millisecond)
			defer cancel()
			_, err = types().Where(c.slow(0)).All(dctx)
			if err == nil || store.IsBudgetSpent(err) {
				t.Fatalf("a statement past its deadline, within its budget: %v", err)
			}
		})
	}
}

// sqliteStep is the time of one step of a recursive count on SQLite, measured.
var sqliteStep time.Duration

func where(expr string) predicate.ShopType {
	return func(s *entsql.Selector) { s.Where(entsql.ExprP(expr)) }
}
