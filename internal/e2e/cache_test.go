package e2e_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// metric reads one counter of the server's /metrics (0 when absent).
func (e *env) metric(name string) float64 {
	e.t.Helper()
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func TestShopCacheWiring(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	admin := e.login(e.admin)
	typeID, shopID := firstTypeAndShop(e)
	byID := `query($id: ID!) { shop(id: $id) { id name type { name } } }`

	// Mutex mode: the second read is a cache hit, and a cached shop still resolves its edges.
	e.ok("", byID, map[string]any{"id": shopID})
	d := e.ok("", byID, map[string]any{"id": shopID})
	if str(d, "shop", "type", "name") == "" {
		t.Fatalf("cached shop lost its edges: %v", d)
	}
	if e.metric(`surge_cache_loads_total{cache="shop"}`) != 1 || e.metric(`surge_cache_hits_total{cache="shop"}`) < 1 {
		t.Fatal("shop(id) is not served from the cache")
	}

	// Delete-after-write: an update is visible at once, never a stale cached name.
	for i := 0; i < 5; i++ {
		name := "Renamed " + strconv.Itoa(i)
		e.ok(admin, updateShop, map[string]any{"id": shopID, "in": map[string]any{"name": name}})
		if got := str(e.ok("", byID, map[string]any{"id": shopID}), "shop", "name"); got != name {
			t.Fatalf("after updateShop: %q, want %q (stale cache)", got, name)
		}
	}

	// Penetration: ids that never existed are answered by the Bloom filter; no keys appear.
	rdb := testenv.Redis(t)
	prefix := e.app.Config.Namespace + ":cache"
	for i := 0; i < 50; i++ {
		id := strconv.Itoa(4294967297 + 100000 + i)
		if get(e.ok("", byID, map[string]any{"id": id}), "shop") != nil {
			t.Fatalf("shop %s exists?", id)
		}
	}
	if rejects := e.metric(`surge_cache_bloom_rejects_total{cache="shop"}`); rejects < 45 {
		t.Fatalf("only %v of 50 missing ids rejected by the Bloom filter", rejects)
	}
	keys, _ := rdb.Keys(ctx, prefix+":shop:*").Result()
	if len(keys) > 1+5 { // the real shop, plus at most a few false-positive absences
		t.Fatalf("%d cache keys after 50 missing ids: %v", len(keys), keys)
	}

	// A new shop is in the filter at once, so it is readable by id.
	created := e.ok(admin, createShop, map[string]any{"in": map[string]any{"name": "Fresh", "typeID": typeID, "longitude": 1, "latitude": 1}})
	if got := str(e.ok("", byID, map[string]any{"id": str(created, "createShop", "id")}), "shop", "name"); got != "Fresh" {
		t.Fatalf("new shop by id: %q", got)
	}

	// shopTypes: logical expiry, one load for many reads.
	for i := 0; i < 5; i++ {
		if len(list(e.ok("", `{ shopTypes { id name } }`, nil), "shopTypes")) != 10 {
			t.Fatal("shopTypes")
		}
	}
	if n := e.metric(`surge_cache_loads_total{cache="shop-types"}`); n != 1 {
		t.Fatalf("shopTypes loaded %v times for 5 reads", n)
	}
	if ttl := rdb.PTTL(ctx, prefix+":shop-types:{all}").Val(); ttl != -1 {
		t.Fatalf("shopTypes entry has TTL %v; logical expiry keeps it", ttl)
	}
}
