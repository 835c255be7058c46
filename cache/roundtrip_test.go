package cache_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

// trips counts what a client sends: single commands and pipelines each cost one round trip.
type trips struct{ n atomic.Int32 }

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

func TestBatchReadsAreOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	testenv.TrackKeys(t, rdb)
	c := newCacheOn[int](t, rdb, cache.Options{Name: uniqueName("trips")})
	var ids []string
	for i := 0; i < 200; i++ {
		ids = append(ids, fmt.Sprint(i))
	}
	load := func(_ context.Context, ids []string) (map[string]int, error) {
		out := map[string]int{}
		for i, id := range ids {
			out[id] = i
		}
		return out, nil
	}
	if _, err := c.LoadMany(ctx, ids, load); err != nil { // cold: warm everything
		t.Fatal(err)
	}
	h := &trips{}
	rdb.AddHook(h)
	got, err := c.GetMany(ctx, ids)
	if err != nil || len(got) != 200 {
		t.Fatalf("GetMany: %d, %v", len(got), err)
	}
	if n := h.n.Load(); n != 1 {
		t.Fatalf("GetMany of 200 warm ids took %d round trips, want 1", n)
	}
	h.n.Store(0)
	if _, err := c.LoadMany(ctx, ids, load); err != nil {
		t.Fatal(err)
	}
	if n := h.n.Load(); n != 1 {
		t.Fatalf("warm LoadMany of 200 ids took %d round trips, want 1", n)
	}
	// Cold: read, lease and write back are one round trip each, whatever the count.
	h.n.Store(0)
	if err := c.Delete(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	if n := h.n.Load(); n != 1 {
		t.Fatalf("Delete of 200 ids took %d round trips, want 1", n)
	}
	if got, _ := c.GetMany(ctx, ids); len(got) != 0 {
		t.Fatalf("%d values survived Delete", len(got))
	}
	h.n.Store(0)
	if got, err := c.LoadMany(ctx, ids, load); err != nil || len(got) != 200 {
		t.Fatalf("cold LoadMany: %d, %v", len(got), err)
	}
	if n := h.n.Load(); n != 3 {
		t.Fatalf("cold LoadMany of 200 ids took %d round trips, want 3 (read, lease, write back)", n)
	}
}
