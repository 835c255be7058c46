package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
)

// collector gathers ids from several generators and counts repeats.
type collector struct {
	mu   sync.Mutex
	seen map[int64]struct{}
	dups int
	n    int
}

func (c *collector) add(ids []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[int64]struct{}{}
	}
	for _, id := range ids {
		c.n++
		if _, ok := c.seen[id]; ok {
			c.dups++
		}
		c.seen[id] = struct{}{}
	}
}

// losses are the ways a Redis can lose what it counted, each applied to a private server while
// generators run: the key gone (FLUSHALL, a restart without persistence) or an older state
// back (a failover to a replica that lagged, an AOF that lost its tail: an older snapshot
// restored).
var losses = []struct {
	name  string
	setup func(srv *testenv.RedisServer)
	lose  func(t *testing.T, srv *testenv.RedisServer)
}{
	{"flushall", nil, func(t *testing.T, srv *testenv.RedisServer) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer c.Close()
		if err := c.FlushAll(context.Background()).Err(); err != nil {
			t.Error(err)
		}
	}},
	{"restart-empty", nil, func(t *testing.T, srv *testenv.RedisServer) { srv.Kill(); srv.Start() }},
	{"older-snapshot", func(srv *testenv.RedisServer) { srv.Snapshot("early") }, func(t *testing.T, srv *testenv.RedisServer) { srv.Restore("early") }},
}

// Two processes' generators (own clients) draw ids while Redis loses its state 0.3 s into a
// second; both go on for the rest of that second and a little into the next. Not one id may repeat, in
// either mode, across the generators: ids issued after the loss must not meet ids issued
// before it, though the counter that separated them is gone or older.
// With an epoch store (MariaDB) too: the fences then go through the store, from 8 goroutines of
// 2 processes at once.
func TestNoDuplicatesAfterRedisLoss(t *testing.T) {
	for _, withStore := range []bool{false, true} {
		for _, mode := range modes {
			for _, loss := range losses {
				name := mode.name + "/" + loss.name
				if withStore {
					name = "epochs/" + name
				}
				t.Run(name, func(t *testing.T) {
					var opts []idgen.Option
					if withStore {
						opts = append(opts, idgen.WithEpochStore(newEpochs(t, epochStores[0].open(t))))
					}
					srv := testenv.StartRedis(t)
					open := func() redis.UniversalClient {
						c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 5, MinRetryBackoff: 10 * time.Millisecond})
						t.Cleanup(func() { c.Close() })
						return c
					}
					var gens []*idgen.Generator
					for range 2 {
						g, err := mode.new(open(), "order", append(opts, idgen.WithStep(50, 1000))...)
						if err != nil {
							t.Fatal(err)
						}
						defer g.Close()
						gens = append(gens, g)
					}
					ctx := context.Background()
					// Warm up both, so each holds state from before the loss.
					for _, g := range gens {
						if _, err := g.Next(ctx); err != nil {
							t.Fatal(err)
						}
					}
					if loss.setup != nil {
						loss.setup(srv)
					}
					// Start at the beginning of a second, lose 0.3 s into it, stop after the next.
					start := time.Now().Truncate(time.Second).Add(time.Second)
					time.Sleep(time.Until(start))
					stop := start.Add(1200 * time.Millisecond)
					var c collector
					var wg sync.WaitGroup
					var errMu sync.Mutex
					var errs []error
					for _, g := range gens {
						for range 4 {
							wg.Add(1)
							go func() {
								defer wg.Done()
								var ids []int64
								for i := 0; time.Now().Before(stop); i++ {
									if i%16 == 15 {
										time.Sleep(time.Millisecond) // ~100k ids/s in all: dense, not huge
									}
									id, err := g.Next(ctx)
									if err != nil {
										// The loss itself may fail calls (a restarting server); that is
										// allowed, repeating an id is not.
										errMu.Lock()
										errs = append(errs, err)
										errMu.Unlock()
										time.Sleep(5 * time.Millisecond)
										continue
									}
									ids = append(ids, id)
								}
								c.add(ids)
							}()
						}
					}
					time.Sleep(time.Until(start.Add(300 * time.Millisecond)))
					loss.lose(t, srv)
					wg.Wait()
					t.Logf("%d ids, %d failed calls (the loss), %d duplicates", c.n, len(errs), c.dups)
					if c.n < 100 {
						t.Fatalf("only %d ids: the generators hardly ran (errors: %v)", c.n, firstErr(errs))
					}
					if c.dups != 0 {
						t.Fatalf("%d of %d ids were issued twice after the Redis loss", c.dups, c.n)
					}
				})
			}
		}
	}
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// Raise: an id known to be issued (found in a database) lifts the shared counter of its day
// above it, whatever Redis lost, and later ids of every generator of the prefix are distinct
// from it and from the ids before it.
func TestRaiseAboveKnownID(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	a, _ := idgen.New(rdb, "order")
	defer a.Close()
	var issued []int64
	for range 50 {
		id, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		issued = append(issued, id)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A second process, with no memory of the first, is told the largest id in the database.
	b, _ := idgen.NewSegment(redis.NewClient(&redis.Options{Addr: srv.Addr}), "order")
	defer b.Close()
	if err := b.Raise(ctx, issued[len(issued)-1]); err != nil {
		t.Fatal(err)
	}
	var c collector
	c.add(issued)
	for range 1000 {
		id, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id <= issued[len(issued)-1] {
			t.Fatalf("id %d after Raise(%d)", id, issued[len(issued)-1])
		}
		c.add([]int64{id})
	}
	if c.dups != 0 {
		t.Fatalf("%d duplicates", c.dups)
	}
	if err := b.Raise(ctx, 0); err == nil {
		t.Fatal("Raise(0) accepted")
	}
}

// A frozen Redis (SIGSTOP) with a default client: Next honours its ctx deadline in both modes.
func TestNextHonoursDeadlineOnFrozenRedis(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := testenv.StartRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr}) // default options
			defer rdb.Close()
			g, err := mode.new(rdb, "order", idgen.WithStep(10, 10))
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ctx := context.Background()
			for range 30 { // use up segment mode's blocks
				if _, err := g.Next(ctx); err != nil {
					t.Fatal(err)
				}
			}
			srv.Freeze()
			defer srv.Thaw()
			var got error
			for range 50 {
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				start := time.Now()
				_, err := g.Next(cctx)
				took := time.Since(start)
				cancel()
				if took > 700*time.Millisecond {
					t.Fatalf("Next took %v on a 200 ms deadline (err %v)", took, err)
				}
				if err != nil {
					got = err
					break
				}
			}
			if !errors.Is(got, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want DeadlineExceeded", got)
			}
			srv.Thaw()
			deadline := time.Now().Add(20 * time.Second)
			for {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := g.Next(cctx)
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(fmt.Errorf("no id 20 s after Redis thawed: %w", err))
				}
			}
		})
	}
}
