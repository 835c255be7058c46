package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

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
	e.app.DB.SQL.Close()
	if code, body := health(t, e.url); code != http.StatusServiceUnavailable || body["database"] != "down" {
		t.Fatalf("db down: %d %v", code, body)
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
