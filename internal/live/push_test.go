package live_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/live"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// counter counts the commands a client sends (pipelined ones one by one).
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// ownService replaces e.svc by a service on a client of its own, named name, counting its
// commands.
func (e *env) ownService(name string) *counter {
	e.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: e.rdb.(*redis.Client).Options().Addr, ClientName: name})
	e.t.Cleanup(func() { _ = c.Close() })
	testenv.TrackKeys(e.t, c)
	cnt := &counter{}
	c.AddHook(cnt)
	s, err := seckill.New(e.db.Ent, c, seckill.Options{
		Prefix: e.prefix, Dialect: e.db.Dialect, Logger: quiet(), RateLimit: seckill.RateLimit{PerSecond: -1},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	e.svc = s
	return cnt
}

// TestCreatedDeliveredThroughPubSubDrops kills the Hub's pub/sub connection again and again
// while another process persists the orders: events published while it is down are lost, and
// with the sweep out of the picture (one hour) only the catch-up after each resubscription
// can deliver them. Every stream must still end with CREATED.
func TestCreatedDeliveredThroughPubSubDrops(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	name := "live-drop-" + testenv.Phone()
	e.ownService(name)
	h := e.hub(live.Options{SweepInterval: time.Hour})
	const n = 300
	v := e.voucher(n, false)
	users := e.users(n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	chans := make([]<-chan seckillorder.Status, n)
	for i, u := range users {
		order := e.grab(u, v)
		var err error
		if chans[i], err = h.OrderStatus(ctx, u, order); err != nil {
			t.Fatal(err)
		}
		want(t, chans[i], seckillorder.StatusQUEUED, time.Second)
	}

	// Kill the Hub's subscription connection (found by its client name) every few ms.
	killCtx, stopKilling := context.WithCancel(ctx)
	var kills atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for killCtx.Err() == nil {
			list, err := rdb.ClientList(killCtx).Result()
			if err == nil {
				for l := range strings.SplitSeq(list, "\n") {
					if strings.Contains(l, " name="+name+" ") && strings.Contains(l, " sub=1 ") {
						id := strings.TrimPrefix(strings.Fields(l)[0], "id=")
						if rdb.Do(killCtx, "CLIENT", "KILL", "ID", id).Err() == nil {
							kills.Add(1)
						}
					}
				}
			}
			time.Sleep(3 * time.Millisecond)
		}
	})
	gaps := h.Stats().Gaps
	// The orders go to the database in small batches over the killing.
	other := e.service()
	stop := e.consume(other)
	time.Sleep(1500 * time.Millisecond)
	stopKilling()
	wg.Wait()
	wantAllEndCreated(t, chans)
	stop()
	st := h.Stats()
	t.Logf("%d kills, %d gaps caught up, stats %+v", kills.Load(), st.Gaps-gaps, st)
	if kills.Load() == 0 || st.Gaps == gaps {
		t.Fatalf("the test dropped nothing (%d kills, %d gaps)", kills.Load(), st.Gaps-gaps)
	}
	noLeaks(t, h)
}

// TestIdleSubscribersCostNothing opens many order and stock subscriptions and checks that
// while nothing changes the Hub sends no Redis command and reads nothing, and what each idle
// subscription costs in goroutines and memory.
func TestIdleSubscribersCostNothing(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	cnt := e.ownService("live-idle-" + testenv.Phone())
	h := e.hub(live.Options{SweepInterval: time.Hour})
	const n = 500
	v := e.voucher(n, false)
	users := e.users(n)
	orders := make([]int64, n)
	// Another process admits them (and, with no consumer running, remembers them as told, which
	// costs it a check a second while they wait: seckill/told.go); this one only serves the
	// subscriptions.
	admitting := e.service()
	for i, u := range users {
		a, err := admitting.Grab(context.Background(), u, v)
		if err != nil {
			t.Fatalf("grab by user %d: %v", u, err)
		}
		orders[i] = a.OrderID
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	var keep []any
	for i, u := range users {
		o, err := h.OrderStatus(ctx, u, orders[i])
		if err != nil {
			t.Fatal(err)
		}
		want(t, o, seckillorder.StatusQUEUED, time.Second)
		s, err := h.Stock(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		next(t, s, time.Second)
		keep = append(keep, o, s)
	}
	time.Sleep(300 * time.Millisecond) // settle: the start's catch-up, the last stock read
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	subs := 2 * n
	perSub := (float64(after.HeapInuse+after.StackInuse) - float64(before.HeapInuse+before.StackInuse)) / float64(subs)
	goroutines := float64(runtime.NumGoroutine()-g0) / float64(subs)
	t.Logf("per idle subscription: %.0f bytes, %.2f goroutines", perSub, goroutines)
	if perSub > 20<<10 {
		t.Errorf("%.0f bytes per idle subscription, want ≤ 20 KB", perSub)
	}
	if goroutines > 0.05 {
		t.Errorf("%.2f goroutines per subscription in the Hub, want none (gqlgen's own reads the channel)", goroutines)
	}

	cmds, reads := cnt.n.Load(), h.Stats()
	time.Sleep(2 * time.Second)
	st := h.Stats()
	if d := cnt.n.Load() - cmds; d != 0 {
		t.Errorf("%d Redis commands in 2 s with %d idle subscriptions, want none", d, subs)
	}
	if st.OrderReads != reads.OrderReads || st.StockReads != reads.StockReads {
		t.Errorf("reads while idle: %+v -> %+v", reads, st)
	}

	// A sweep costs one batched read per voucher, not one per subscriber.
	sweeps := st.Sweeps
	h2 := e.hub(live.Options{SweepInterval: 200 * time.Millisecond})
	var keep2 []any
	for i, u := range users[:100] {
		o, err := h2.OrderStatus(ctx, u, orders[i])
		if err != nil {
			t.Fatal(err)
		}
		keep2 = append(keep2, o)
	}
	r0, s0 := h2.Stats().OrderReads, h2.Stats().Sweeps
	time.Sleep(time.Second)
	st2 := h2.Stats()
	if sw := st2.Sweeps - s0; sw < 3 || st2.OrderReads-r0 > sw+1 {
		t.Errorf("%d order reads over %d sweeps of 100 orders of one voucher, want one per sweep", st2.OrderReads-r0, sw)
	}
	_, _, _ = keep, keep2, sweeps
}
