package e2e_test

import (
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/testenv"
)

func health(t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestHealthzReportsOutages(t *testing.T) {
	addr, stopRedis := testenv.PrivateRedis(t)
	e := start(t, func(c *app.Config) { c.RedisAddrs = []string{addr} })
	if code, body := health(t, e.url); code != 200 || body["redis"] != "ok" || body["database"] != "ok" {
		t.Fatalf("healthy: %d %v", code, body)
	}
	stopRedis()
	if code, body := health(t, e.url); code != http.StatusServiceUnavailable || body["redis"] != "down" || body["database"] != "ok" {
		t.Fatalf("redis down: %d %v", code, body)
	}
	// The server stays up: reads that need no Redis still answer.
	e.ok("", `{ shopTypes { id } }`, nil)

	// With the database gone, resolvers fail with a bare INTERNAL error: no SQL, no driver text.
	// Readiness reuses its database answer for up to a second (app.readyEvery): the
	// healthy answer above may still stand for that long.
	e.app.DB.SQL.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		code, body := health(t, e.url)
		if code == http.StatusServiceUnavailable && body["database"] == "down" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("db down for 3 s: %d %v", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := e.wantCode("INTERNAL", "", `{ shops(first: 2) { totalCount } }`, nil)
	if r.Errors[0].Message != "internal error" || strings.Contains(strings.ToLower(r.Raw), "sql") {
		t.Fatalf("internal error leaks detail: %s", r.Raw)
	}
}

func TestMetricsExposed(t *testing.T) {
	e := start(t)
	e.ok("", `{ shopTypes { id } }`, nil)
	e.do("", `{ shop(id: "x") { id } }`, nil)
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`surge_graphql_operations_total{outcome="ok",type="query"}`,
		`surge_graphql_errors_total{code="BAD_USER_INPUT"} 1`,
		`surge_graphql_duration_seconds_bucket`,
		`go_goroutines`,
		// what explains a latency tail: waits for a CPU and GC stops (issue 24)
		`go_sched_latencies_seconds_bucket`,
		`go_sched_pauses_total_gc_seconds_bucket`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Issue 33, item 4: a server whose database was dropped and created again under it answered
// /readyz "database ok" (the server still reached MariaDB) while every query answered
// INTERNAL. Readiness checks that the database still holds this deployment: dropped and
// recreated empty, or migrated since by another deployment, it is not ok.
func TestReadinessNoticesAReplacedDatabase(t *testing.T) {
	e := start(t)
	if code, body := health(t, e.url); code != http.StatusOK || body["database"] != "ok" {
		t.Fatalf("healthy: %d %v", code, body)
	}
	cfg, err := mysql.ParseDSN(e.app.Config.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.DBName
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{"DROP DATABASE `" + name + "`", "CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	notReady := func(what, state string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			code, body := health(t, e.url)
			if code == http.StatusServiceUnavailable && body["database"] == state {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz %d %v; want 503 with the database %q", what, code, body, state)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	notReady("database dropped and created again, empty", "down") // no settings table: the query fails
	e.wantCode("INTERNAL", "", `{ shops(first: 2) { totalCount } }`, nil)

	// Another deployment migrates the new database (its own namespace): it holds a deployment
	// again, not this server's.
	other := start(t, func(c *app.Config) { c.MySQLDSN = e.app.Config.MySQLDSN })
	if code, body := health(t, other.url); code != http.StatusOK || body["database"] != "ok" {
		t.Fatalf("the new deployment on the new database: %d %v", code, body)
	}
	notReady("database migrated by another deployment", "not this deployment")
}
