package bench_test

import (
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// TestSubscriptions runs the scenario small on real Redis and MariaDB: every watcher gets its
// CREATED and the final stock, and the idle window costs the Hub no read per subscriber.
func TestSubscriptions(t *testing.T) {
	rdb := testenv.Redis(t)
	err, res, _ := runErr(t, "subscriptions", "-orders", "40", "-stock", "30", "-idle", "1s",
		"-redis-addrs", testenv.RedisAddr(), "-mysql-dsn", testenv.MySQL(t), "-namespace", namespace(t, rdb))
	if err != nil {
		t.Fatal(err)
	}
	if res["created_delivered"] != float64(40) || res["stock_delivered"] != float64(30) {
		t.Fatalf("delivered CREATED %v (want 40), final stock %v (want 30)", res["created_delivered"], res["stock_delivered"])
	}
	if r := res["idle_hub_reads"].(float64); r > 2 {
		t.Errorf("%v Hub reads in a 1 s idle window with 70 subscriptions, want at most one sweep (2)", r)
	}
}
