package idgen_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
)

// A segment generator closed (or killed) mid-block and a new one started: the newcomer never
// hands out a number of the old blocks, even the parts the first one never used.
func TestSegmentRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(testing.TB) redis.UniversalClient) {
		ctx := context.Background()
		rdb := open(t)
		p := newPrefix(t, rdb)
		seen := map[int64]bool{}
		var firstRunMax uint32
		for _, taken := range []int{50, 150, 1999} { // mid-block, prefetch done, end of the prefetched block
			g, err := idgen.NewSegment(open(t), p, idgen.WithStep(1000, 1000))
			if err != nil {
				t.Fatal(err)
			}
			var runMin uint32 = idgen.MaxSequence
			for range taken {
				id, err := g.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if seen[id] {
					t.Fatalf("id %d handed out again after a restart", id)
				}
				seen[id] = true
				_, seq := idgen.Decompose(id)
				runMin = min(runMin, seq)
			}
			if runMin <= firstRunMax {
				t.Fatalf("after restart the lowest number is %d, at or below the previous run's reserved %d", runMin, firstRunMax)
			}
			// Everything Redis gave out so far is the previous runs' (used or abandoned).
			v, _ := counter(ctx, rdb, dayKey(p, time.Now()))
			firstRunMax = uint32(v)
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Next waits for Redis only when both blocks are used up, and then no longer than its context;
// Close ends a fetch stuck on a paused Redis and returns.
func TestSegmentBlockedNextHonoursContext(t *testing.T) {
	addr, _ := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	g, err := idgen.NewSegment(rdb, "paused", idgen.WithStep(10, 10))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := g.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 1500, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	served := 0
	for {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		_, err := g.Next(cctx)
		took := time.Since(start)
		cancel()
		if err == nil {
			served++ // the rest of the current and the prefetched block
			if served > 20 {
				t.Fatal("more ids than two blocks while Redis is paused")
			}
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
			t.Fatalf("blocked Next: %v after %v", err, took)
		}
		break
	}
	start := time.Now()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v", took)
	}
	if _, err := g.Next(ctx); !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// Redis down: a segment generator returns the Redis error once its blocks are used up, and
// works again when Redis is back.
func TestSegmentRedisDown(t *testing.T) {
	addr, stop := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	g, _ := idgen.NewSegment(rdb, "down", idgen.WithStep(10, 10))
	defer g.Close()
	ctx := context.Background()
	if _, err := g.Next(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	var err error
	for range 100 {
		if _, err = g.Next(ctx); err != nil {
			break
		}
	}
	if err == nil || errors.Is(err, idgen.ErrSequenceExhausted) {
		t.Fatalf("with Redis down: %v", err)
	}
}
