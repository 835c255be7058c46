package cache_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

type benchPayload struct {
	ID    int64    `json:"id"`
	Name  string   `json:"name"`
	Price int64    `json:"price"`
	Stock int      `json:"stock"`
	Tags  []string `json:"tags"`
}

// BenchmarkHitWithFilter measures a warm GetOrLoad on a cache with a Redis Bloom filter
// against the baseline of a raw GET + json.Unmarshal of the same JSON, interleaved in one run
// so that both share the machine's noise. It reports both means, their ratio and the ratio of
// the medians (the target is ≤ 1.15): go test -bench HitWithFilter -run '^$' ./cache/
//
// default-client: go-redis defaults, which ignore context deadlines, so each cache call runs
// in a goroutine of its own to return at RedisTimeout (redisctx); deadline-client: with
// ContextTimeoutEnabled, the cache's calls are plain calls.
func BenchmarkHitWithFilter(b *testing.B) {
	for _, kind := range []struct {
		name string
		opts redis.Options
	}{
		{"default-client", redis.Options{Addr: testenv.RedisAddr()}},
		{"deadline-client", redis.Options{Addr: testenv.RedisAddr(), ContextTimeoutEnabled: true}},
	} {
		b.Run(kind.name, func(b *testing.B) {
			rdb := redis.NewClient(&kind.opts)
			b.Cleanup(func() { rdb.Close() })
			testenv.TrackKeys(b, rdb)
			benchHitWithFilter(b, rdb)
		})
	}
}

func benchHitWithFilter(b *testing.B, rdb *redis.Client) {
	ctx := context.Background()
	name := uniqueName("benchhit")
	const keys = 1000
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	f, err := cache.NewRedisFilter(rdb, name, keys, 0.01)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Rebuild(ctx, slices.Values(ids)); err != nil {
		b.Fatal(err)
	}
	c, err := cache.New[benchPayload](ctx, rdb, cache.Options{Name: name, Filter: f, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	rawKey := func(i int) string { return name + ":raw:" + ids[i] }
	defer func() {
		for i := range ids {
			rdb.Del(ctx, rawKey(i), c.Key(ids[i]))
		}
		rdb.Del(ctx, f.Key(), f.Key()+":meta")
	}()
	for i := range ids {
		v := benchPayload{ID: int64(i), Name: "shop " + ids[i], Price: 1999, Stock: i, Tags: []string{"flash", "sale"}}
		raw, _ := json.Marshal(v)
		if err := c.Set(ctx, ids[i], v); err != nil {
			b.Fatal(err)
		}
		if err := rdb.Set(ctx, rawKey(i), raw, time.Hour).Err(); err != nil {
			b.Fatal(err)
		}
	}
	load := func(context.Context, string) (benchPayload, error) {
		b.Fatal("a warm key was loaded")
		return benchPayload{}, nil
	}
	raw := func(i int) {
		bs, err := rdb.Get(ctx, rawKey(i)).Bytes()
		var v benchPayload
		if err != nil || json.Unmarshal(bs, &v) != nil {
			b.Fatal(err)
		}
	}
	ours := func(i int) {
		if _, err := c.GetOrLoad(ctx, ids[i], load); err != nil {
			b.Fatal(err)
		}
	}
	rawT := make([]time.Duration, b.N)
	oursT := make([]time.Duration, b.N)
	b.ResetTimer()
	for n := range b.N {
		i := n % keys
		first, second, t1, t2 := raw, ours, &rawT[n], &oursT[n]
		if n%2 == 1 {
			first, second, t1, t2 = ours, raw, &oursT[n], &rawT[n]
		}
		start := time.Now()
		first(i)
		mid := time.Now()
		second(i)
		*t1 = mid.Sub(start)
		*t2 = time.Since(mid)
	}
	b.StopTimer()
	var rawSum, oursSum time.Duration
	for n := range b.N {
		rawSum, oursSum = rawSum+rawT[n], oursSum+oursT[n]
	}
	slices.Sort(rawT)
	slices.Sort(oursT)
	b.ReportMetric(float64(rawSum.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(oursSum.Nanoseconds())/float64(b.N), "ours-ns/op")
	b.ReportMetric(float64(oursSum)/float64(rawSum), "ours/raw")
	b.ReportMetric(float64(oursT[b.N/2])/float64(rawT[b.N/2]), "ours/raw-p50")
}
