package idgen_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
)

// epochStores are the databases an idgen.SQLEpochs can keep its fences in: MariaDB (a fresh
// database) and SQLite (a file).
var epochStores = []struct {
	name string
	open func(t *testing.T) *sql.DB
}{
	{"mariadb", func(t *testing.T) *sql.DB {
		db, err := sql.Open("mysql", testenv.MySQL(t))
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(4)
		t.Cleanup(func() { db.Close() })
		return db
	}},
	{"sqlite", func(t *testing.T) *sql.DB {
		dsn := "file:" + filepath.Join(t.TempDir(), "epochs.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}},
}

// newEpochs opens an epoch store on db, its table created.
func newEpochs(t *testing.T, db *sql.DB) *idgen.SQLEpochs {
	t.Helper()
	s, err := idgen.NewSQLEpochs(db, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// redisSecond reads Redis's clock, to the second.
func redisSecond(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.Unix()
}

// withinOneRedisSecond runs round (on a fresh private Redis each attempt, from the start of one
// of its seconds) until all of it ran within that second by Redis's clock: the repro is
// a loss in the same second as the fence before it, and a round that crosses into the next
// second proves nothing. It returns what the successful round returned.
func withinOneRedisSecond(t *testing.T, round func(t *testing.T, srv *testenv.RedisServer) []int64) []int64 {
	t.Helper()
	for attempt := 0; attempt < 6; attempt++ {
		srv := testenv.StartRedis(t)
		probe := redis.NewClient(&redis.Options{Addr: srv.Addr})
		now, err := probe.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Start 20 ms into the next second by Redis's clock (this machine's clock is Redis's).
		time.Sleep(time.Until(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
		first := redisSecond(t, probe)
		ids := round(t, srv)
		last := redisSecond(t, probe)
		probe.Close()
		if first == last {
			return ids
		}
		t.Logf("attempt %d crossed a second (%d -> %d): again", attempt, first, last)
	}
	t.Fatal("no round fitted in one Redis second in 6 attempts")
	return nil
}

// draw takes n ids from g.
func draw(t *testing.T, g *idgen.Generator, n int) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for range n {
		id, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// repeats counts the ids (each a (second, sequence) pair) that appear more than once.
func repeats(ids []int64) int {
	seen := map[int64]bool{}
	n := 0
	for _, id := range ids {
		if seen[id] {
			n++
		}
		seen[id] = true
	}
	return n
}

// flush empties a private Redis, as FLUSHALL on a production one would.
func flush(t *testing.T, srv *testenv.RedisServer) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// lossRound is the repro on one private Redis: generator 0 takes the first ids of an
// empty Redis (a fenced reservation), Redis is flushed, generator 1 takes ids; with flushes > 1,
// flushed again and generator 2 takes ids, and so on: every step within one Redis second.
// Each generator is a process of its own (its own client), with no memory of the others.
func lossRound(t *testing.T, srv *testenv.RedisServer, flushes int, newGen func(rdb redis.UniversalClient) (*idgen.Generator, error)) []int64 {
	var all []int64
	for i := 0; i <= flushes; i++ {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer rdb.Close()
		g, err := newGen(rdb)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if i > 0 {
			flush(t, srv)
		}
		all = append(all, draw(t, g, 60)...)
	}
	return all
}

// The repro (a) and (d): a flush in the same Redis second as the fence of the first
// reservation, once and twice; in both modes, with each epoch store. No (second, sequence) pair
// may repeat.
func TestNoRepeatAfterLossInTheFenceSecond(t *testing.T) {
	for _, store := range epochStores {
		for _, mode := range modes {
			for _, flushes := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%s/flushes=%d", store.name, mode.name, flushes), func(t *testing.T) {
					epochs := newEpochs(t, store.open(t))
					ids := withinOneRedisSecond(t, func(t *testing.T, srv *testenv.RedisServer) []int64 {
						return lossRound(t, srv, flushes, func(rdb redis.UniversalClient) (*idgen.Generator, error) {
							return mode.new(rdb, "order", idgen.WithStep(50, 1000), idgen.WithEpochStore(epochs))
						})
					})
					if n := repeats(ids); n != 0 {
						t.Fatalf("%d of %d ids repeated after %d flush(es) in the fence's second", n, len(ids), flushes)
					}
				})
			}
		}
	}
}

// The repro (b): the same across a new UTC day. The generators' clock stands just after
// the coming midnight; the day key of that day is new, so its first reservation is fenced, and a
// flush in the same Redis second must not restart the day's numbers under the same fence.
// The clock skew covers the distance between the injected clock and Redis's (as a real
// midnight's clocks are within the skew), so the fence lands in the new day as it would.
func TestNoRepeatAfterLossInANewDaysFenceSecond(t *testing.T) {
	for _, store := range epochStores {
		for _, mode := range modes {
			t.Run(store.name+"/"+mode.name, func(t *testing.T) {
				epochs := newEpochs(t, store.open(t))
				midnight := nextMidnight()
				clk := newClock(midnight.Add(200*time.Millisecond), 0)
				skew := time.Until(midnight) + 2*time.Second
				ids := withinOneRedisSecond(t, func(t *testing.T, srv *testenv.RedisServer) []int64 {
					return lossRound(t, srv, 2, func(rdb redis.UniversalClient) (*idgen.Generator, error) {
						return mode.new(rdb, "order", idgen.WithStep(50, 1000), idgen.WithClock(clk.Now),
							idgen.WithMaxClockSkew(skew), idgen.WithEpochStore(epochs))
					})
				})
				day := midnight.UTC().Format("20060102")
				for _, id := range ids {
					if at, _ := idgen.Decompose(id); at.UTC().Format("20060102") != day {
						t.Fatalf("id %d stamped %v, not on the new day %s", id, at, day)
					}
				}
				if n := repeats(ids); n != 0 {
					t.Fatalf("%d of %d ids of the new day repeated after flushes in its fence's second", n, len(ids))
				}
			})
		}
	}
}

// The store's contract (EpochStore), on each database: fences shared while unclaimed, claimed
// once, never reissued or lowered, a superseded fence refused, and a failed apply holding the
// fence (no later fence recorded) until its hold ends.
func TestSQLEpochsContract(t *testing.T) {
	for _, store := range epochStores {
		t.Run(store.name, func(t *testing.T) {
			s := newEpochs(t, store.open(t))
			ctx := context.Background()
			const name = "ns:id:order"
			if f, err := s.Latest(ctx, name); err != nil || f != 0 {
				t.Fatalf("Latest of a new name = %d, %v; want 0", f, err)
			}
			f1, err := s.Advance(ctx, name, 1000)
			if err != nil || f1 != 1000 {
				t.Fatalf("first Advance = %d, %v; want 1000", f1, err)
			}
			if f, _ := s.Advance(ctx, name, 990); f != f1 {
				t.Fatalf("an unclaimed fence is shared: got %d, want %d", f, f1)
			}
			if f, _ := s.Advance(ctx, name, 1005); f != 1005 {
				t.Fatalf("Advance(1005) over an unclaimed 1000 = %d, want 1005", f)
			}
			f1 = 1005
			applied := 0
			apply := func(context.Context) error { applied++; return nil }
			if err := s.Apply(ctx, name, f1, time.Now(), apply); err != nil || applied != 1 {
				t.Fatalf("Apply = %v, applied %d", err, applied)
			}
			if err := s.Apply(ctx, name, f1, time.Now(), apply); !errors.Is(err, idgen.ErrFenceTaken) || applied != 1 {
				t.Fatalf("second Apply of one fence = %v (applied %d), want ErrFenceTaken", err, applied)
			}
			// Claimed: the next fence is above it, even when asked for less.
			f2, _ := s.Advance(ctx, name, 10)
			if f2 != f1+1 {
				t.Fatalf("Advance after a claim = %d, want %d", f2, f1+1)
			}
			f3, _ := s.Advance(ctx, name, f2+5)
			if err := s.Apply(ctx, name, f2, time.Now(), apply); !errors.Is(err, idgen.ErrFenceTaken) {
				t.Fatalf("Apply of a superseded fence = %v, want ErrFenceTaken", err)
			}
			if latest, _ := s.Latest(ctx, name); latest != f3 {
				t.Fatalf("Latest = %d, want %d", latest, f3)
			}
			// A failed apply: the fence stays held until holdUntil; Advance waits for it.
			hold := 800 * time.Millisecond
			boom := errors.New("redis hung")
			if err := s.Apply(ctx, name, f3, time.Now().Add(hold), func(context.Context) error { return boom }); !errors.Is(err, boom) {
				t.Fatalf("Apply with a failing apply = %v", err)
			}
			start := time.Now()
			f4, err := s.Advance(ctx, name, 0)
			waited := time.Since(start)
			if err != nil || f4 != f3+1 {
				t.Fatalf("Advance after a failed apply = %d, %v; want %d", f4, err, f3+1)
			}
			if waited < hold/2 {
				t.Fatalf("Advance went through %v after a failed apply held for %v", waited, hold)
			}
			// Concurrent callers: every fence applied is above the one applied before it.
			var mu sync.Mutex
			var order []int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						f, err := s.Advance(ctx, name, 0)
						if err != nil {
							t.Error(err)
							return
						}
						_ = s.Apply(ctx, name, f, time.Now(), func(context.Context) error {
							mu.Lock()
							order = append(order, f)
							mu.Unlock()
							return nil
						})
					}
				}()
			}
			wg.Wait()
			if len(order) == 0 {
				t.Fatal("no concurrent Apply went through")
			}
			for i := 1; i < len(order); i++ {
				if order[i] <= order[i-1] {
					t.Fatalf("fences applied out of order: %v", order)
				}
			}
		})
	}
}

// A fence with Redis frozen (SIGSTOP) and a default go-redis client: Next returns at its
// deadline, and once Redis thaws, ids resume with none repeated.
func TestFenceOnFrozenRedisHonoursDeadline(t *testing.T) {
	epochs := newEpochs(t, epochStores[0].open(t))
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	g, err := idgen.New(rdb, "order", idgen.WithEpochStore(epochs))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	before := draw(t, g, 20)
	other := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer other.Close()
	b, _ := idgen.New(other, "order", idgen.WithEpochStore(epochs))
	defer b.Close()
	flush(t, srv)
	srv.Freeze()
	defer srv.Thaw()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	start := time.Now()
	_, err = b.Next(ctx)
	cancel()
	if took := time.Since(start); took > time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on a frozen Redis: %v after %v, want DeadlineExceeded within 1 s", err, took)
	}
	srv.Thaw()
	var after []int64
	deadline := time.Now().Add(20 * time.Second)
	for len(after) < 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := b.Next(ctx)
		cancel()
		if err == nil {
			after = append(after, id)
		} else if time.Now().After(deadline) {
			t.Fatalf("no id 20 s after Redis thawed: %v", err)
		}
	}
	if n := repeats(append(before, after...)); n != 0 {
		t.Fatalf("%d ids repeated", n)
	}
}

// Fence records a fence at once after a loss, though a segment generator still holds a block
// reserved before it: LatestFence then lies after every id issued before the loss.
func TestFenceAfterLossRecordsAtOnce(t *testing.T) {
	epochs := newEpochs(t, epochStores[0].open(t))
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	g, err := idgen.NewSegment(rdb, "order", idgen.WithEpochStore(epochs))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ids := draw(t, g, 10)
	before, err := g.LatestFence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	flush(t, srv)
	if err := g.Fence(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, err := g.LatestFence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last, _ := idgen.Decompose(ids[len(ids)-1])
	if !after.After(before) || !last.Before(after) {
		t.Fatalf("fence before the loss %v, after Fence %v; last id's second %v: want a later fence past it", before, after, last)
	}
	if err := g.Fence(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again, _ := g.LatestFence(context.Background()); !again.Equal(after) {
		t.Fatalf("a second Fence without a loss moved the fence from %v to %v", after, again)
	}
}

// TestSQLEpochsConcurrentFirstFences: many generators fencing for the first time at once (a
// fresh namespace whose sales warm together: one name per id prefix and day) all get their
// fence. A first fence that inserted its row inside the transaction whose UPDATE had found
// none held a gap lock (InnoDB) there, and two of them deadlocked (Error 1213) while the
// store gave up after a few tries.
func TestSQLEpochsConcurrentFirstFences(t *testing.T) {
	for _, store := range epochStores {
		t.Run(store.name, func(t *testing.T) {
			db := store.open(t)
			db.SetMaxOpenConns(16)
			s := newEpochs(t, db)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const names, callers = 24, 4 // callers per name
			fences := make([][]int64, names)
			errs := make(chan error, names*callers)
			var wg sync.WaitGroup
			for n := range names {
				fences[n] = make([]int64, callers)
				for c := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						f, err := s.Advance(ctx, fmt.Sprintf("ns:id:p%d:20261127", n), 1000+int64(n))
						if err != nil {
							errs <- err
						}
						fences[n][c] = f
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("a first fence failed: %v", err)
			}
			for n, fs := range fences {
				for _, f := range fs {
					if f != 1000+int64(n) { // unclaimed: concurrent callers share the first fence
						t.Errorf("name %d: fences %v, want each %d", n, fs, 1000+n)
						break
					}
				}
			}
		})
	}
}
