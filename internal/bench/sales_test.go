package bench_test

import (
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// TestSalesBench: bench sales runs 30 sales at once in process on real Redis and MySQL,
// verifies each exact and reports the per-voucher lag and the consumer's costs, its stream
// pool within 2 × readers + 2.
func TestSalesBench(t *testing.T) {
	clearSurgeEnv(t)
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb)
	t.Cleanup(func() { deletePattern(t, rdb, ns+":*") })
	err, res, _ := runErr(t, "sales", "-inprocess", "-vouchers", "30", "-users", "5", "-idle", "1s", "-seckill-readers", "4",
		"-redis-addrs", testenv.RedisAddr(), "-mysql-dsn", testenv.MySQL(t), "-namespace", ns, "-json-only")
	if err != nil {
		t.Fatal(err)
	}
	if res["ok"] != true || res["admitted"] != float64(150) || res["undrained"] != float64(0) {
		t.Fatalf("result: %v", res)
	}
	lag := res["persistence_lag_ms"].(map[string]any)
	if lag["n"] != float64(30) || lag["max"].(float64) <= 0 {
		t.Fatalf("lag: %v", lag)
	}
	peak := res["peak_during"].(map[string]any)
	if conns := peak["stream_pool_conns"].(float64); conns < 1 || conns > 2*4+2 {
		t.Fatalf("stream pool connections at peak: %v, want 1..10", conns)
	}
	if idle := res["idle_after"].(map[string]any)["redis_commands_per_s"].(float64); idle <= 0 || idle > 50 {
		t.Fatalf("idle commands/s: %v", idle)
	}
}

// TestSalesBenchServers: with -servers 3 bench sales builds three apps in process on the same
// Redis, MySQL and namespace, grabs round-robin over them, verifies every sale once, and
// reports each app's share; more than one app's consumer persisted orders.
func TestSalesBenchServers(t *testing.T) {
	clearSurgeEnv(t)
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb)
	t.Cleanup(func() { deletePattern(t, rdb, ns+":*") })
	err, res, _ := runErr(t, "sales", "-inprocess", "-servers", "3", "-vouchers", "30", "-users", "10", "-idle", "1s", "-seckill-readers", "2",
		"-redis-addrs", testenv.RedisAddr(), "-mysql-dsn", testenv.MySQL(t), "-namespace", ns, "-json-only")
	if err != nil {
		t.Fatal(err)
	}
	if res["ok"] != true || res["servers"] != float64(3) || res["admitted"] != float64(300) || res["undrained"] != float64(0) {
		t.Fatalf("result: %v", res)
	}
	if lag := sub(t, res, "persistence_lag_ms"); lag["n"] != float64(30) || lag["max"].(float64) <= 0 {
		t.Fatalf("lag: %v", lag)
	}
	if conns := sub(t, res, "peak_during")["stream_pool_conns"].(float64); conns < 1 || conns > 3*(2*2+2) {
		t.Fatalf("stream pool connections at peak, 3 servers: %v, want 1..18", conns)
	}
	per, _ := res["per_server"].([]any)
	if len(per) != 3 {
		t.Fatalf("per_server: %v", res["per_server"])
	}
	// Each order is acknowledged, and counted, at least once by the consumer that wrote it.
	persisting, sum := 0, 0.0
	for _, p := range per {
		s := p.(map[string]any)
		if s["idle_after_redis_commands_per_s"].(float64) <= 0 {
			t.Fatalf("a server without idle commands: %v", s)
		}
		if n := s["orders_persisted"].(float64); n > 0 {
			persisting, sum = persisting+1, sum+n
		}
	}
	idle := sub(t, res, "idle_after")["redis_commands_per_s"].(float64)
	if persisting < 2 || sum < 300 || idle <= 0 {
		t.Fatalf("%d servers persisted orders (%v in all, want ≥ 300), idle commands/s %v: %v", persisting, sum, idle, per)
	}
}

// TestSalesBenchConsumerOnly: with -servers 2 -consumer-only 1 the first app takes every grab
// and runs no consumer, the second runs the consumer and takes no grab: every order is
// persisted by the second, each sale exact, and each voucher's lag is measured.
func TestSalesBenchConsumerOnly(t *testing.T) {
	clearSurgeEnv(t)
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb)
	t.Cleanup(func() { deletePattern(t, rdb, ns+":*") })
	err, res, _ := runErr(t, "sales", "-inprocess", "-servers", "2", "-consumer-only", "1", "-vouchers", "30", "-users", "3",
		"-idle", "1s", "-seckill-readers", "4", "-redis-addrs", testenv.RedisAddr(), "-mysql-dsn", testenv.MySQL(t), "-namespace", ns, "-json-only")
	if err != nil {
		t.Fatal(err)
	}
	if res["ok"] != true || res["consumer_only"] != float64(1) || res["admitted"] != float64(90) || res["undrained"] != float64(0) {
		t.Fatalf("result: %v", res)
	}
	per, _ := res["per_server"].([]any)
	if len(per) != 2 {
		t.Fatalf("per_server: %v", res["per_server"])
	}
	if grabber, worker := per[0].(map[string]any)["orders_persisted"], per[1].(map[string]any)["orders_persisted"]; grabber != float64(0) || worker.(float64) < 90 {
		t.Fatalf("orders persisted by the grab-only server %v, by the consumer-only one %v; want 0 and 90", grabber, worker)
	}
	if lag := sub(t, res, "persistence_lag_ms"); lag["n"] != float64(30) || lag["p99"].(float64) > 3000 {
		t.Fatalf("lag: %v (want p99 ≤ 3 s)", lag)
	}
}
