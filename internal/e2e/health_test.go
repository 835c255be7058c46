package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/app"
)

// privateRedis starts a throwaway redis-server on a free port so the test can stop it
// without disturbing the shared one.
func privateRedis(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("private redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

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
	addr, stopRedis := privateRedis(t)
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
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
