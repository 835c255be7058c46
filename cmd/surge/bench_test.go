package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// The bench subcommand through the real binary: the stampede scenario re-executes this binary as
// `surge bench stampede-worker`, a path only the built command takes.
func TestBenchSubcommand(t *testing.T) {
	bin := surgeBinary(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "bench", "cache-stampede", "-redis-addrs", testenv.RedisAddr(), "-procs", "2", "-goroutines", "10", "-json-only")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("surge bench cache-stampede: %v\n%s", err, stderr.String())
	}
	var res struct {
		Scenario string `json:"scenario"`
		DBLoads  int    `json:"db_loads"`
		Callers  int    `json:"callers"`
		Errors   int    `json:"errors"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("-json-only output is not one JSON object: %v\n%s", err, stdout.String())
	}
	if res.Scenario != "cache-stampede" || res.DBLoads != 1 || res.Callers != 20 || res.Errors != 0 {
		t.Fatalf("got %+v, want one database load for 20 callers in 2 processes", res)
	}

	// No scenario: the list of scenarios and a failure exit.
	stderr.Reset()
	cmd = exec.Command(bin, "bench")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Error("surge bench without a scenario succeeded")
	}
	for _, s := range []string{"cache-stampede", "cache-penetration", "cache-hit", "lock", "seckill", "drain", "subscriptions", "http"} {
		if !strings.Contains(stderr.String(), s) {
			t.Errorf("surge bench usage does not list %s:\n%s", s, stderr.String())
		}
	}
	for _, hidden := range []string{"stampede-worker", "floor-serve"} {
		if strings.Contains(stderr.String(), hidden) {
			t.Errorf("the hidden scenario %s is listed", hidden)
		}
	}
}

// bench subscriptions with the server in its own process (the binary re-executed as `surge
// serve`): every watcher gets CREATED and the final stock, and the server's own figures come
// from its /proc entry and /metrics, apart from the client's.
func TestBenchSubscriptionsServerProcess(t *testing.T) {
	bin := surgeBinary(t)
	rdb := testenv.Redis(t)
	ns := "bench-subs" + testenv.Phone()
	testenv.CleanupKeys(t, rdb, ns+":*")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "bench", "subscriptions", "-orders", "30", "-stock", "20", "-idle", "1s", "-server-process", "-json-only",
		"-redis-addrs", testenv.RedisAddr(), "-mysql-dsn", testenv.MySQL(t), "-namespace", ns)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("surge bench subscriptions -server-process: %v\n%s", err, stderr.String())
	}
	var res struct {
		Server           string  `json:"server"`
		CreatedDelivered int     `json:"created_delivered"`
		StockDelivered   int     `json:"stock_delivered"`
		Goroutines       int     `json:"goroutines"`
		BaseGoroutines   int     `json:"base_goroutines"`
		RSSMB            float64 `json:"rss_mb"`
		ClientRSSMB      float64 `json:"client_rss_mb"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("-json-only output is not one JSON object: %v\n%s", err, stdout.String())
	}
	if res.Server != "process" || res.CreatedDelivered != 30 || res.StockDelivered != 20 {
		t.Fatalf("got %+v, want 30 CREATED and 20 final stocks from a server process", res)
	}
	// 50 subscriptions: at most 2 goroutines each, and room for the pools' (a MySQL connection
	// has a watcher goroutine) and the keep-alive goroutine.
	if res.BaseGoroutines == 0 || res.RSSMB == 0 || res.ClientRSSMB == 0 || res.Goroutines-res.BaseGoroutines > 2*50+50 {
		t.Fatalf("server figures %+v: want goroutines from its /metrics, RSS from /proc, at most 2 goroutines per subscription (+ a constant)", res)
	}
}
