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
