package server_test

// The database round trips of a request, counted at the driver under the real server
// (gqlgen, resolvers, catalog cache) on MariaDB and Redis: aliases and id lists must not turn
// one request into thousands of queries (issue 12, item 4).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/surgekit/surge/ent"
	gql "github.com/surgekit/surge/graph"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/server"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
)

// countingDriver counts the statements sent to the database.
type countingDriver struct {
	dialect.Driver
	n atomic.Int64
}

func (d *countingDriver) Query(ctx context.Context, query string, args, v any) error {
	d.n.Add(1)
	return d.Driver.Query(ctx, query, args, v)
}

func (d *countingDriver) Exec(ctx context.Context, query string, args, v any) error {
	d.n.Add(1)
	return d.Driver.Exec(ctx, query, args, v)
}

type batchEnv struct {
	t       *testing.T
	url     string
	queries *countingDriver
	db      *ent.Client
}

func newBatchEnv(t *testing.T) *batchEnv {
	t.Helper()
	ctx := context.Background()
	db, err := store.OpenMySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SeedDemo(ctx, db.Ent, time.Now()); err != nil {
		t.Fatal(err)
	}
	drv := &countingDriver{Driver: entsql.OpenDB(dialect.MySQL, db.SQL)}
	client := ent.NewClient(ent.Driver(drv))
	rdb := testenv.Redis(t)
	prefix := "batch-test-" + testenv.Phone()
	t.Cleanup(func() {
		for _, pattern := range []string{prefix + "*", "*{" + prefix + "*"} {
			iter := rdb.Scan(context.Background(), 0, pattern, 1000).Iterator()
			for iter.Next(context.Background()) {
				rdb.Del(context.Background(), iter.Val())
			}
		}
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cat, err := catalog.New(ctx, client, rdb, catalog.CacheOptions{Namespace: prefix, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	res := &gql.Resolver{DB: client, Auth: auth.New(rdb, client, auth.Options{}), Catalog: cat, Log: log}
	srv := httptest.NewServer(server.GraphQL(res, &server.Options{Logger: log}))
	t.Cleanup(srv.Close)
	return &batchEnv{t: t, url: srv.URL + "/query", queries: drv, db: client}
}

// run sends query (and variables, if any) and returns the statements it cost and the
// response.
func (e *batchEnv) run(query string, vars ...map[string]any) (int64, map[string]any) {
	e.t.Helper()
	req := map[string]any{"query": query}
	if len(vars) > 0 {
		req["variables"] = vars[0]
	}
	body, _ := json.Marshal(req)
	before := e.queries.n.Load()
	resp, err := http.Post(e.url, "application/json", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		e.t.Fatal(err)
	}
	return e.queries.n.Load() - before, out
}

func quoted(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Quote(strconv.Itoa(id))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func TestNodesLoadEachTableInOneQuery(t *testing.T) {
	e := newBatchEnv(t)
	ctx := context.Background()
	var ids []int
	ids = append(ids, e.db.Shop.Query().IDsX(ctx)...)
	ids = append(ids, e.db.ShopType.Query().IDsX(ctx)...)
	ids = append(ids, e.db.Voucher.Query().IDsX(ctx)...)
	for i := len(ids); i < 100; i++ {
		ids = append(ids, 4294967297+1000+i) // absent shops
	}
	n, out := e.run(`{ nodes(ids: ` + quoted(ids) + `) { id ... on Shop { name vouchers { id } } ... on ShopType { name } } }`)
	found := 0
	for _, node := range out["data"].(map[string]any)["nodes"].([]any) {
		if node != nil {
			found++
		}
	}
	if errs := out["errors"]; errs != nil || found != 22 {
		t.Fatalf("nodes: %d found, errors %v", found, errs)
	}
	// shops, shop types, vouchers, and the vouchers of the shops: 4 statements, whatever the
	// number of ids.
	if n > 4 {
		t.Fatalf("nodes(100 ids over 3 tables) with shops' vouchers: %d statements, want at most 4", n)
	}
	t.Logf("nodes(100 ids): %d statements", n)

	// Aliases within the budget: one statement per table each. The ids travel as a variable,
	// as an attacker would send them (as literals, 29 lists of 100 ids exceed the token limit).
	aliases := func(n int) string {
		var b strings.Builder
		b.WriteString("query($ids: [ID!]!) {")
		for i := range n {
			fmt.Fprintf(&b, " n%d: nodes(ids: $ids) { id }", i)
		}
		return b.String() + " }"
	}
	vars := map[string]any{"ids": strings.Split(strings.Trim(strings.ReplaceAll(quoted(ids), `"`, ""), "[]"), ", ")}
	n, out = e.run(aliases(10), vars)
	if n > 10*3 || out["errors"] != nil {
		t.Fatalf("10 × nodes(100 ids over 3 tables): %d statements (%v), want at most 30", n, out["errors"])
	}
	t.Logf("10 × nodes(100 ids): %d statements", n)
	// The attack of the issue, 29 aliases (2 927 statements before): over the complexity
	// budget now that a root field's database round trip counts.
	n, out = e.run(aliases(29), vars)
	if n > 29*3 {
		t.Fatalf("29 × nodes(100 ids): %d statements (%v)", n, out["errors"])
	}
	t.Logf("29 × nodes(100 ids): %d statements, errors %v", n, out["errors"])
}

func TestAliasedLookupsAreBatched(t *testing.T) {
	e := newBatchEnv(t)
	ctx := context.Background()
	var b strings.Builder
	b.WriteString("{")
	for i, id := range e.db.Shop.Query().IDsX(ctx) { // cold cache: every shop is a miss
		fmt.Fprintf(&b, ` s%d: shop(id: "%d") { id name }`, i, id)
	}
	vouchers := e.db.Voucher.Query().IDsX(ctx)
	for i := range 30 {
		fmt.Fprintf(&b, ` v%d: voucher(id: "%d") { id title }`, i, vouchers[i%len(vouchers)])
	}
	b.WriteString(" }")
	n, out := e.run(b.String())
	if out["errors"] != nil {
		t.Fatalf("errors: %v", out["errors"])
	}
	data := out["data"].(map[string]any)
	if data["s9"] == nil || data["v29"] == nil {
		t.Fatalf("aliases unanswered: %v", data)
	}
	// One statement for the 10 shops missing from the cache, one for the vouchers.
	if n > 2 {
		t.Fatalf("10 aliased shop(id:) and 30 voucher(id:): %d statements, want at most 2", n)
	}
	t.Logf("10 shop(id:) + 30 voucher(id:) aliases: %d statements", n)
}
