package seckill_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// slowSweep makes the sweep of the live vouchers take liveVouchers seconds a round (one
// command a second), so that only an announcement can explain an order persisted at once.
const (
	slowSweep    = 1
	liveVouchers = 8
)

// grabberAndWorker returns a service that takes the grabs and runs no consumer, one that runs
// the consumer and takes no grab (two processes of a deployment), both sweeping slowly, and
// liveVouchers sales on.
func (e *env) grabberAndWorker() (grabber, worker *seckill.Service, vouchers []int) {
	grabber = e.service(seckill.Options{SweepRate: slowSweep})
	worker = e.service(seckill.Options{SweepRate: slowSweep})
	vouchers = make([]int, liveVouchers)
	for i := range vouchers {
		vouchers[i] = e.onSale(grabber, 100)
	}
	return grabber, worker, vouchers
}

// rowWatch notes when each order's row first shows in the database.
type rowWatch struct {
	mu   sync.Mutex
	seen map[int64]time.Time
	stop func()
}

func (e *env) watchRows(vouchers []int) *rowWatch {
	w := &rowWatch{seen: map[int64]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	in := strings.Repeat(",?", len(vouchers))[1:]
	args := make([]any, len(vouchers))
	for i, v := range vouchers {
		args[i] = v
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			rows, err := e.db.SQL.QueryContext(ctx, "SELECT id FROM tb_voucher_order WHERE voucher_id IN ("+in+")", args...)
			now := time.Now()
			if err == nil {
				for rows.Next() {
					var id int64
					if rows.Scan(&id) == nil {
						w.mu.Lock()
						if _, ok := w.seen[id]; !ok {
							w.seen[id] = now
						}
						w.mu.Unlock()
					}
				}
				_ = rows.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	w.stop = func() { cancel(); <-done }
	e.t.Cleanup(w.stop)
	return w
}

// lags waits up to within for every order's row and returns, per order, the time from its
// answer to its row.
func (w *rowWatch) lags(t *testing.T, answered map[int64]time.Time, within time.Duration) []time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		w.mu.Lock()
		var lags []time.Duration
		for id, at := range answered {
			if seen, ok := w.seen[id]; ok {
				lags = append(lags, max(0, seen.Sub(at)))
			}
		}
		w.mu.Unlock()
		if len(lags) == len(answered) || time.Now().After(deadline) {
			slices.Sort(lags)
			return lags
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func p99(lags []time.Duration) time.Duration {
	if len(lags) == 0 {
		return 0
	}
	return lags[min(len(lags)-1, len(lags)*99/100)]
}

// TestGrabOnlyOrdersArePickedUpAtOnce: orders admitted by a process that runs no consumer are
// written by a consumer in another process within a fraction of a second, whatever the sweep's
// pace (here a round of the live vouchers takes 8 s): the admitting process announces the
// vouchers that got new orders on a channel every consumer listens to. The announcement is
// batched (at most one message per few milliseconds per process), and none is sent while
// nothing is admitted, nor by a process that persists its own orders.
func TestGrabOnlyOrdersArePickedUpAtOnce(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		grabber, worker, vouchers := e.grabberAndWorker()
		msgs := listen(t, rdb, seckill.AnnounceChannel(grabber))
		e.consume(worker)
		time.Sleep(1500 * time.Millisecond) // the consumer lists the vouchers and starts
		if n := msgs.count(); n != 0 {
			t.Errorf("%d announcements while nothing was admitted", n)
		}

		rows := e.watchRows(vouchers)
		users := e.users(40)
		answered := map[int64]time.Time{}
		start := time.Now()
		for i, u := range users {
			a, err := grabber.Grab(ctx, u, vouchers[i%len(vouchers)])
			if err != nil {
				t.Fatal(err)
			}
			answered[a.OrderID] = time.Now()
			time.Sleep(50 * time.Millisecond)
		}
		grabbing := time.Since(start)
		lags := rows.lags(t, answered, 20*time.Second)
		if len(lags) != len(answered) {
			t.Fatalf("%d of %d orders reached the database", len(lags), len(answered))
		}
		t.Logf("persistence lag of %d orders admitted by a process without a consumer: p50 %v, p99 %v, max %v",
			len(lags), lags[len(lags)/2], p99(lags), lags[len(lags)-1])
		if p99(lags) > time.Second {
			t.Errorf("persistence lag p99 %v, want < 1 s (the sweep alone takes up to %d s)", p99(lags), liveVouchers/slowSweep)
		}

		// The mechanism: the grabs were announced, naming their vouchers, in at most one
		// message per gap.
		got := msgs.vouchers()
		for _, v := range vouchers {
			if !got[v] {
				t.Errorf("voucher %d: no announcement named it (%d messages)", v, msgs.count())
			}
		}
		if n, most := msgs.count(), int(grabbing/seckill.AnnounceGap)+2; n > most || n > len(users) {
			t.Errorf("%d announcements for %d grabs in %v, want at most one per %v", n, len(users), grabbing, seckill.AnnounceGap)
		}

		// A process that runs its own consumer announces nothing: it persists what it admits.
		before := msgs.count()
		e.consume(grabber)
		time.Sleep(200 * time.Millisecond)
		for _, u := range e.users(5) {
			if _, err := grabber.Grab(ctx, u, vouchers[0]); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if n := msgs.count() - before; n != 0 {
			t.Errorf("%d announcements from a process running its own consumer", n)
		}
		for _, v := range vouchers {
			e.drained(v, 10*time.Second)
		}
	})
}

// TestConsumerStartsOnABacklogAtOnce: a consumer that starts while orders wait, admitted by a
// process with no consumer before any consumer listened (so no announcement reached one),
// starts writing them at once rather than when its sweep comes round to their voucher.
func TestConsumerStartsOnABacklogAtOnce(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		grabber, worker, vouchers := e.grabberAndWorker()
		rows := e.watchRows(vouchers)
		answered := map[int64]time.Time{}
		for i, u := range e.users(2 * liveVouchers) {
			a, err := grabber.Grab(ctx, u, vouchers[i%len(vouchers)])
			if err != nil {
				t.Fatal(err)
			}
			answered[a.OrderID] = time.Now()
		}
		start := time.Now()
		e.consume(worker)
		for id := range answered {
			answered[id] = start // lag counted from the consumer's start
		}
		lags := rows.lags(t, answered, 20*time.Second)
		if len(lags) != len(answered) {
			t.Fatalf("%d of %d orders reached the database", len(lags), len(answered))
		}
		t.Logf("from the consumer's start to each order's row: p50 %v, max %v", lags[len(lags)/2], lags[len(lags)-1])
		if lags[len(lags)-1] > 1500*time.Millisecond {
			t.Errorf("the last order waiting took %v from the consumer's start, want < 1.5 s (the sweep alone takes up to %d s)",
				lags[len(lags)-1], liveVouchers/slowSweep)
		}
	})
}

// announcements counts the messages on a channel and the vouchers they name.
type announcements struct {
	mu   sync.Mutex
	msgs []string
}

func listen(t *testing.T, rdb redis.UniversalClient, channel string) *announcements {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ps := testenv.Another(t, rdb).Subscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	a := &announcements{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			a.mu.Lock()
			a.msgs = append(a.msgs, m.Payload)
			a.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); _ = ps.Close(); <-done })
	return a
}

func (a *announcements) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.msgs)
}

// vouchers are the voucher ids the messages named (a message is "<publisher> <id> <id>…").
func (a *announcements) vouchers() map[int]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int]bool{}
	for _, m := range a.msgs {
		f := strings.Fields(m)
		for _, s := range f[min(1, len(f)):] {
			if v, err := strconv.Atoi(s); err == nil {
				out[v] = true
			}
		}
	}
	return out
}

// TestResubscribedConsumerSweepsEveryVoucher: announcements are at most once. When the
// consumer's subscription breaks (here Redis drops it: CLIENT KILL on a private Redis), what is
// announced until it subscribes again is lost, so each new subscription sweeps every live
// voucher at once; the orders admitted meanwhile are written within a second, not when the
// sweep (8 s a round here) comes round to them.
func TestResubscribedConsumerSweepsEveryVoucher(t *testing.T) {
	addr, _ := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	e := newEnv(t, rdb)
	ctx := context.Background()
	var full atomic.Int64
	t.Cleanup(seckill.SetSweepAllHook(func() { full.Add(1) })) // undone after the services stop
	grabber, worker, vouchers := e.grabberAndWorker()
	channel := seckill.AnnounceChannel(grabber)
	subscribers := func() int64 {
		n, err := rdb.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	e.consume(worker)
	waitFor(t, 5*time.Second, func() bool { // the first sweep of every voucher, and the subscription
		return full.Load() >= 1 && subscribers() == 1
	})
	rows := e.watchRows(vouchers)
	sweeps := full.Load()
	if err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	answered := map[int64]time.Time{}
	for i, u := range e.users(liveVouchers) {
		a, err := grabber.Grab(ctx, u, vouchers[i])
		if err != nil {
			t.Fatal(err)
		}
		answered[a.OrderID] = time.Now()
	}
	waitFor(t, 5*time.Second, func() bool { // a sweep of every voucher once subscribed again
		return full.Load() > sweeps && subscribers() == 1
	})
	lags := rows.lags(t, answered, 20*time.Second)
	if len(lags) != len(answered) {
		t.Fatalf("%d of %d orders reached the database", len(lags), len(answered))
	}
	t.Logf("orders admitted around a broken subscription: lag p50 %v, max %v", lags[len(lags)/2], lags[len(lags)-1])
	if lags[len(lags)-1] > 1500*time.Millisecond {
		t.Errorf("an order admitted around a broken subscription waited %v, want < 1.5 s", lags[len(lags)-1])
	}
}

// TestAnnouncementOfAGoneSaleCreatesNoKey: an announcement heard after the sale's keys are gone
// (the sale retired or dropped while the announcement waited for its gap, as `bench seckill
// -consume-after` does between its sales) must not bring the orders stream back: a stream
// the consumer creates to recreate its group has no expiry, and would outlive the sale forever.
func TestAnnouncementOfAGoneSaleCreatesNoKey(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	ctx := context.Background()
	grabber, worker, vouchers := e.grabberAndWorker()
	v := vouchers[0]
	k := seckill.KeysOf(e.prefix, v)
	if err := rdb.Del(ctx, k.Meta, k.Stock, k.Buyers, k.Orders).Err(); err != nil {
		t.Fatal(err)
	}
	e.consume(worker)
	channel := seckill.AnnounceChannel(grabber)
	waitFor(t, 5*time.Second, func() bool { return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 1 })
	if err := rdb.Publish(ctx, channel, fmt.Sprintf("another-process %d", v)).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the reader's turn comes at once; the pace allows 300 ms
	if n := rdb.Exists(ctx, k.Orders).Val(); n != 0 {
		ttl := rdb.PTTL(ctx, k.Orders).Val()
		t.Fatalf("the orders stream of a gone sale is back (TTL %v): the consumer recreated it", ttl)
	}
}
