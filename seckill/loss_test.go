package seckill_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// Tests of what happens when Redis loses data: a flush between two servers' grabs, a failover
// to a replica that lagged (an older snapshot restored mid-sale), and the order ids an id
// counter that went back hands out a second time.

// lossOptions make a consumer give up on an entry quickly (the silent-acknowledgement bug
// showed only once an entry was given up on) and freeze the clock on one second, so that
// generators drawing from a counter that went back hand out the very ids issued before.
func lossOptions(clock func() time.Time) seckill.Options {
	return seckill.Options{Clock: clock, ClaimIdle: 200 * time.Millisecond, MaxDeliveries: 2}
}

// frozenClock always reads the same instant, inside the sale window of e.voucher.
func frozenClock() func() time.Time {
	at := time.Now().Truncate(time.Second).Add(10 * time.Millisecond)
	return func() time.Time { return at }
}

// privateEnv is an env on a private redis-server of its own (see testenv.StartRedis).
func privateEnv(t *testing.T, args ...string) (*env, *testenv.RedisServer) {
	t.Helper()
	srv := testenv.StartRedis(t, args...)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return newEnv(t, rdb), srv
}

// told is one grab answered "admitted": the user and the order id they were told.
type told struct {
	user  int
	order int64
}

// ledger records what the users were told.
type ledger struct {
	mu   sync.Mutex
	told []told
}

func (l *ledger) add(user int, order int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, told{user, order})
}

// grabAll grabs once for each user through s (waiting out NOT_READY) and records the
// admissions; refusals other than sold out and already purchased fail the test.
func grabAll(t *testing.T, s *seckill.Service, v int, users []int, l *ledger) {
	t.Helper()
	for _, u := range users {
		a, err := grabReady(t, s, u, v)
		switch {
		case err == nil:
			l.add(u, a.OrderID)
		case errors.Is(err, seckill.ErrSoldOut), errors.Is(err, seckill.ErrAlreadyPurchased):
		default:
			t.Fatalf("grab by user %d: %v", u, err)
		}
	}
}

// checkTold asserts the invariant of a sale whatever Redis lost: every user told QUEUED ends
// with exactly one order they can see (order(id) finds it, it is among the user's orders,
// a new grab names it as the one already purchased) or with a visible FAILED order; no order
// stands for two users; the database is not oversold and holds no user twice.
func checkTold(t *testing.T, e *env, s *seckill.Service, v, stock int, l *ledger) {
	t.Helper()
	ctx := context.Background()
	owner := map[int]int{} // order the user sees -> user
	failed := 0
	for _, x := range l.told {
		o, err := s.Order(ctx, x.user, x.order)
		if err != nil {
			t.Fatalf("order(%d) for user %d: %v", x.order, x.user, err)
		}
		if o == nil {
			t.Errorf("user %d was told order %d: order(%d) finds nothing", x.user, x.order, x.order)
			continue
		}
		if o.UserID != x.user || o.VoucherID != v {
			t.Errorf("user %d, order(%d): an order of user %d, voucher %d", x.user, x.order, o.UserID, o.VoucherID)
			continue
		}
		if prev, ok := owner[o.ID]; ok && prev != x.user {
			t.Errorf("order %d stands for users %d and %d", o.ID, prev, x.user)
		}
		owner[o.ID] = x.user
		mine := e.db.Ent.SeckillOrder.Query().Where(seckillorder.UserID(x.user), seckillorder.VoucherID(v)).AllX(ctx)
		listed, live := false, 0
		for _, m := range mine {
			listed = listed || m.ID == o.ID
			if m.Status != seckillorder.StatusFAILED {
				live++
			}
		}
		if !listed {
			t.Errorf("user %d: order %d (told %d) is not among their orders", x.user, o.ID, x.order)
		}
		switch o.Status {
		case seckillorder.StatusFAILED:
			failed++
		case seckillorder.StatusCREATED:
			if live != 1 {
				t.Errorf("user %d holds %d live orders of voucher %d", x.user, live, v)
			}
			// grabReady waits out NOT_READY: after a Redis restart each consumer rebuilds
			// the voucher once (its state may be older than it was), offline for a moment.
			a, err := grabReady(t, s, x.user, v)
			if !errors.Is(err, seckill.ErrAlreadyPurchased) {
				t.Errorf("user %d grabs again: %+v %v, want already purchased", x.user, a, err)
				continue
			}
			if again, err := s.Order(ctx, x.user, a.OrderID); err != nil || again == nil || again.ID != o.ID {
				t.Errorf("user %d: already purchased names order %d, which is %+v (%v), not their order %d", x.user, a.OrderID, again, err, o.ID)
			}
		default:
			t.Errorf("user %d, order %d: status %s after the drain", x.user, o.ID, o.Status)
		}
	}
	st := e.state(v)
	if st.dbStock < 0 || st.dbStock+st.orders != stock {
		t.Errorf("database stock %d + live orders %d != initial %d", st.dbStock, st.orders, stock)
	}
	if st.dupUsers != 0 {
		t.Errorf("%d users hold two live orders", st.dupUsers)
	}
	t.Logf("%d admissions told: %d orders seen, %d of them FAILED; database: %+v", len(l.told), len(owner), failed, st)
}

// TestFlushBetweenTwoServersInOneSecond is issue 11's first report: server A admits users at
// the start of a second and its orders are persisted, Redis is flushed, server B admits other
// users in the same second. B's id generator starts again from the flushed counter: it would
// hand out A's ids again. Every user must end with their own visible order.
func TestFlushBetweenTwoServersInOneSecond(t *testing.T) {
	e, _ := privateEnv(t)
	ctx := context.Background()
	clock := frozenClock()
	a, b := e.service(lossOptions(clock)), e.service(lossOptions(clock))
	e.consume(a)
	e.consume(b)
	const stock = 200
	users := e.users(120)
	v := e.onSale(a, stock)
	l := &ledger{}
	grabAll(t, a, v, users[:60], l)
	e.drained(v, 20*time.Second)
	if err := e.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	grabAll(t, b, v, users[60:], l)
	e.drained(v, 20*time.Second)
	checkTold(t, e, b, v, stock, l)
	e.reconciled(b, v)
}

// reconciled waits until reconcile finds Redis and the database in agreement.
func (e *env) reconciled(s *seckill.Service, v int) {
	e.t.Helper()
	var last seckill.VoucherReport
	e.waitFor("reconcile OK", 10*time.Second, func() bool {
		reports, err := s.Reconcile(context.Background(), seckill.ReconcileOptions{VoucherIDs: []int{v}})
		if err != nil || len(reports) != 1 {
			e.t.Fatalf("reconcile: %v %v", reports, err)
		}
		last = reports[0]
		return last.OK()
	})
	e.t.Logf("reconcile: %s; notes %q", last.Result, last.Notes)
}

// TestLaggingReplicaRestored: Redis comes back with an older state (a failover to a replica
// that lagged, an AOF that lost its tail): a snapshot is taken mid-sale, more users are
// admitted and persisted by a server started after it, then the snapshot is restored and a
// server started after the restore admits more users in the same second, while the users
// admitted after the snapshot (whom the restored buyers do not know) grab again.
func TestLaggingReplicaRestored(t *testing.T) {
	e, srv := privateEnv(t)
	clock := frozenClock()
	a := e.service(lossOptions(clock))
	e.consume(a)
	const stock = 300
	users := e.users(150)
	v := e.onSale(a, stock)
	l := &ledger{}
	grabAll(t, a, v, users[:50], l)
	e.drained(v, 20*time.Second)
	srv.Snapshot("mid-sale")

	b := e.service(lossOptions(clock)) // a server started after the snapshot
	e.consume(b)
	grabAll(t, b, v, users[50:100], l)
	e.drained(v, 20*time.Second)
	srv.Restore("mid-sale")
	if r, err := a.Reconcile(context.Background(), seckill.ReconcileOptions{VoucherIDs: []int{v}}); err != nil || !r[0].Stale {
		t.Errorf("reconcile right after the restore: %+v %v, want the state reported stale", r, err)
	}

	c := e.service(lossOptions(clock)) // a server started after the failover
	e.consume(c)
	grabAll(t, c, v, users[100:], l)
	grabAll(t, c, v, users[50:100], l)
	grabAll(t, a, v, users[:50], l)
	e.drained(v, 20*time.Second)
	checkTold(t, e, c, v, stock, l)
	e.reconciled(c, v)
}

// TestLaggingReplicaResold: as TestLaggingReplicaRestored, but Redis comes back with more
// stock than the database holds (its units' orders were written after the snapshot) and sells
// it before any consumer rebuilds the voucher: the orders beyond the database's stock fail its
// stock guard. They end FAILED at once, with the default options (ClaimIdle 30 s), never
// pending; the database is not oversold and every other told order stands.
func TestLaggingReplicaResold(t *testing.T) {
	e, srv := privateEnv(t)
	clock := frozenClock()
	opts := seckill.Options{Clock: clock}
	a := e.service(opts)
	stopA := e.consume(a)
	const stock = 120
	users := e.users(150)
	v := e.onSale(a, stock)
	l := &ledger{}
	grabAll(t, a, v, users[:50], l)
	e.drained(v, 20*time.Second)
	srv.Snapshot("mid-sale")
	grabAll(t, a, v, users[50:100], l)
	e.drained(v, 20*time.Second) // the database holds 20 units; the snapshot's Redis 70
	stopA()
	srv.Restore("mid-sale")

	c := e.service(opts) // a server started after the failover, its consumer not yet running
	grabAll(t, c, v, users[100:], l)
	e.consume(c)
	e.drained(v, 5*time.Second)
	if st := e.state(v); st.failed != 30 {
		t.Errorf("%d orders FAILED, want the 30 beyond the database's stock", st.failed)
	}
	checkTold(t, e, c, v, stock, l)
	e.reconciled(c, v)
}
