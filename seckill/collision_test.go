package seckill_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// plantRow makes id the id of another user's order, admitted and persisted, as a generator
// reusing ids after Redis lost its counter would have made happen: the row, the unit it took
// in the database and in Redis, and its buyer.
func (e *env) plantRow(id int64, user, voucherID int) {
	e.t.Helper()
	ctx := context.Background()
	k := seckill.KeysOf(e.prefix, voucherID)
	if err := e.rdb.HSet(ctx, k.Buyers, user, id).Err(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.rdb.Decr(ctx, k.Stock).Err(); err != nil {
		e.t.Fatal(err)
	}
	_, err := e.db.SQL.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES (?, NOW(), NOW(), ?, ?, 'CREATED', 1)",
		id, user, voucherID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.db.SQL.ExecContext(ctx, "UPDATE vouchers SET stock = stock - 1 WHERE id = ?", voucherID); err != nil {
		e.t.Fatal(err)
	}
}

// TestOrderIDTakenByAnotherOrder: an admitted order whose id is, by the time the consumer
// writes it, the id of another user's persisted order (same voucher or another one). It is
// never acknowledged into silence, whoever meets it first: the consumer, a rebuild or
// reconcile -fix. It ends re-homed: stored under a fresh id, found by the user under the id
// they were told, named by ALREADY_PURCHASED, counted and listed.
func TestOrderIDTakenByAnotherOrder(t *testing.T) {
	testenv.EachRedis(t, testOrderIDTakenByAnotherOrder)
}

func testOrderIDTakenByAnotherOrder(t *testing.T, rdb redis.UniversalClient) {
	for _, c := range []struct {
		name         string
		otherVoucher bool
		first        func(e *env, s *seckill.Service, v int)
	}{
		{"consumer", false, nil},
		{"other voucher", true, nil},
		{"rebuild first", false, func(e *env, s *seckill.Service, v int) {
			if err := s.Rebuild(context.Background(), v); err != nil {
				e.t.Fatal(err)
			}
		}},
		{"reconcile fix first", false, func(e *env, s *seckill.Service, v int) {
			if _, err := s.Reconcile(context.Background(), seckill.ReconcileOptions{VoucherIDs: []int{v}, Fix: true}); err != nil {
				e.t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, rdb)
			ctx := context.Background()
			const stock = 10
			users := e.users(3)
			reg := prometheus.NewRegistry()
			s := e.service(seckill.Options{ClaimIdle: 200 * time.Millisecond, MaxDeliveries: 2, Registerer: reg})
			v := e.onSale(s, stock)
			l := &ledger{}
			grabAll(t, s, v, users[:2], l)
			victim := l.told[1]
			rowVoucher := v
			if c.otherVoucher {
				rowVoucher = e.onSale(s, stock)
			}
			e.plantRow(victim.order, users[2], rowVoucher)
			if c.first != nil {
				c.first(e, s, v)
			}
			e.consume(s)
			e.drained(v, 20*time.Second)

			o, err := s.Order(ctx, victim.user, victim.order)
			if err != nil || o == nil {
				t.Fatalf("order(%d) for user %d: %+v %v, want their re-homed order", victim.order, victim.user, o, err)
			}
			if int64(o.ID) == victim.order || o.UserID != victim.user || o.Status != seckillorder.StatusCREATED {
				t.Fatalf("order(%d) for user %d: %+v, want a CREATED order of theirs under a fresh id", victim.order, victim.user, o)
			}
			planted, err := e.db.Ent.SeckillOrder.Get(ctx, int(victim.order))
			if err != nil || planted.UserID != users[2] || planted.VoucherID != rowVoucher {
				t.Fatalf("the other user's order %d: %+v %v, want it untouched", victim.order, planted, err)
			}
			if other, err := s.Order(ctx, users[2], victim.order); err != nil || other == nil || other.ID != planted.ID {
				t.Fatalf("the other user's order(%d): %+v %v", victim.order, other, err)
			}
			queued, err := s.QueuedOrders(ctx, victim.user)
			if err != nil || len(queued) != 0 {
				t.Fatalf("queued orders of the victim after the drain: %v %v", queued, err)
			}
			if n := e.rdb.XLen(ctx, seckill.KeysOf(e.prefix, v).Dead).Val(); n != 0 {
				t.Fatalf("%d dead letters, want the order re-homed, not given up on", n)
			}
			if got := counter(t, reg, "surge_seckill_orders_rehomed_total"); got != 1 {
				t.Fatalf("re-homed orders counted: %v, want 1", got)
			}
			checkTold(t, e, s, v, stock, l)
			reports, err := s.Reconcile(ctx, seckill.ReconcileOptions{VoucherIDs: []int{v}})
			if err != nil || len(reports) != 1 {
				t.Fatal(reports, err)
			}
			r := reports[0]
			if !r.OK() || r.Rehomed != 1 || len(r.RehomedOrders) != 1 || r.RehomedOrders[0].Admitted != victim.order || r.RehomedOrders[0].Order != int64(o.ID) {
				t.Fatalf("reconcile: %s %v, rehomed %d %+v; want OK listing %d -> %d", r.Result, r.Problems, r.Rehomed, r.RehomedOrders, victim.order, o.ID)
			}
		})
	}
}

// holdVoucherRow takes the voucher's row lock in MySQL until release: a consumer's batch
// commit waits for it (lockRowIn), which lets a test act while a batch is in flight.
func (e *env) holdVoucherRow(v int) (release func()) {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT id FROM vouchers WHERE id = ? FOR UPDATE", v); err != nil {
		e.t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback()
		}
	}
	e.t.Cleanup(release)
	return release
}

// batchWaiting starts s's consumer while the test holds the voucher's row lock, and returns
// once the consumer has read the n orders queued: its batch then waits for the row lock until
// release (between its read and the lock a consumer sends nothing to Redis).
func (e *env) batchWaiting(s *seckill.Service, v, n int) (release func()) {
	e.t.Helper()
	release = e.holdVoucherRow(v)
	e.consume(s)
	e.waitFor("the consumer reads the batch", 10*time.Second, func() bool { return e.pending(v) == int64(n) })
	return release
}

// pending reports how many entries of the voucher's stream are delivered and not acknowledged.
func (e *env) pending(v int) int64 {
	p, err := e.rdb.XPending(context.Background(), seckill.KeysOf(e.prefix, v).Orders, "orders").Result()
	if err != nil {
		return -1
	}
	return p.Count
}

// dirtyRows counts the voucher's order rows, uncommitted ones included (READ UNCOMMITTED):
// it sees a consumer's batch between its insert and its commit or rollback.
func (e *env) dirtyRows(v int) int {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.db.SQL.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", v).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) waitFor(what string, within time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBatchInFlightWhenRedisLosesIt: a consumer has read a batch and is writing it when Redis
// loses the stream (FLUSHALL). The batch is not written (a rebuild may already count without
// it), and not dropped in silence either: each order is recorded FAILED, which its user sees,
// and may buy again.
func TestBatchInFlightWhenRedisLosesIt(t *testing.T) {
	e, _ := privateEnv(t)
	ctx := context.Background()
	const stock = 20
	users := e.users(5)
	reg := prometheus.NewRegistry()
	s := e.service(seckill.Options{Registerer: reg})
	v := e.onSale(s, stock)
	l := &ledger{}
	grabAll(t, s, v, users, l)
	release := e.batchWaiting(s, v, len(users))
	if err := e.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	release()
	e.waitFor("the batch settles", 10*time.Second, func() bool {
		n, _ := e.db.Ent.SeckillOrder.Query().Where(seckillorder.VoucherID(v)).Count(ctx)
		return n == len(users)
	})
	for _, x := range l.told {
		o, err := s.Order(ctx, x.user, x.order)
		if err != nil || o == nil || o.Status != seckillorder.StatusFAILED {
			t.Fatalf("user %d, order %d lost with Redis: %+v %v, want FAILED", x.user, x.order, o, err)
		}
	}
	// The consumer counts them once their rows are committed, a moment after the rows show.
	e.waitFor("the lost orders are counted", 5*time.Second, func() bool {
		return counter(t, reg, "surge_seckill_orders_lost_total") >= float64(len(users))
	})
	if got := counter(t, reg, "surge_seckill_orders_lost_total"); got != float64(len(users)) {
		t.Fatalf("lost orders counted: %v, want %d", got, len(users))
	}
	st := e.state(v)
	if st.dbStock != stock || st.orders != 0 || st.failed != len(users) {
		t.Fatalf("database after the loss: %+v", st)
	}
	// They may buy again.
	l = &ledger{}
	grabAll(t, s, v, users, l)
	e.drained(v, 20*time.Second)
	if len(l.told) != len(users) {
		t.Fatalf("%d of %d users could buy again", len(l.told), len(users))
	}
	checkTold(t, e, s, v, stock, l)
}

// TestRedisRestartRetriesOwnPendingSoon is issue 11's item 6: a batch whose pending check
// fails because Redis is down (restarting with AOF, then loading) must be retried by its own
// consumer within about two seconds of Redis answering again, not after ClaimIdle (30 s).
func TestRedisRestartRetriesOwnPendingSoon(t *testing.T) {
	e, srv := privateEnv(t, "--appendonly", "yes", "--appendfsync", "always")
	const stock = 100
	users := e.users(50)
	s := e.service(seckill.Options{ClaimIdle: 30 * time.Second})
	v := e.onSale(s, stock)
	l := &ledger{}
	grabAll(t, s, v, users, l)
	release := e.batchWaiting(s, v, len(users))
	srv.Kill()
	release()
	e.waitFor("the batch is inserted", 10*time.Second, func() bool { return e.dirtyRows(v) == len(users) })
	e.waitFor("the batch is rolled back", 20*time.Second, func() bool { return e.dirtyRows(v) == 0 })
	srv.Start()
	back := time.Now()
	e.drained(v, 10*time.Second)
	took := time.Since(back)
	t.Logf("drained %v after Redis answered again", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("drained %v after Redis came back, want about 2 s", took)
	}
	checkTold(t, e, s, v, stock, l)
}

// counter reads a counter of the registry (0 if it has none of that name).
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestSupersededOrderLeadsToTheFirst: Redis forgot a buyer whose order is persisted (its
// buyers hash lost them) and admitted the user again. The database keeps the first order and
// the unit goes back on sale; the second id the user was told leads to the first order, and a
// new grab names it.
func TestSupersededOrderLeadsToTheFirst(t *testing.T) {
	testenv.EachRedis(t, testSupersededOrderLeadsToTheFirst)
}

func testSupersededOrderLeadsToTheFirst(t *testing.T, rdb redis.UniversalClient) {
	e := newEnv(t, rdb)
	ctx := context.Background()
	const stock = 10
	users := e.users(2)
	reg := prometheus.NewRegistry()
	s := e.service(seckill.Options{Registerer: reg})
	v := e.onSale(s, stock)
	e.consume(s)
	l := &ledger{}
	grabAll(t, s, v, users, l)
	e.drained(v, 20*time.Second)
	k := seckill.KeysOf(e.prefix, v)
	if err := e.rdb.HDel(ctx, k.Buyers, strconv.Itoa(users[0])).Err(); err != nil {
		t.Fatal(err)
	}
	grabAll(t, s, v, users[:1], l)
	if len(l.told) != 3 {
		t.Fatalf("told %+v, want the forgotten buyer admitted again", l.told)
	}
	e.drained(v, 20*time.Second)
	first, second := l.told[0], l.told[2]
	o, err := s.Order(ctx, first.user, second.order)
	if err != nil || o == nil || int64(o.ID) != first.order {
		t.Fatalf("order(%d), the second id: %+v %v, want the first order %d", second.order, o, err, first.order)
	}
	if got := counter(t, reg, "surge_seckill_orders_superseded_total"); got != 1 {
		t.Fatalf("superseded orders counted: %v, want 1", got)
	}
	checkTold(t, e, s, v, stock, l)
	e.reconciled(s, v)
}

// TestEntryOfAFailedOrder: an entry whose order the database already holds as FAILED (an
// earlier delivery recorded it and died before compensating, or Redis lost the entry and
// brought it back with an older state) is not settled as persisted: it is dead-lettered and
// its buyer removed, so the user sees FAILED and may buy again.
func TestEntryOfAFailedOrder(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	ctx := context.Background()
	const stock = 10
	users := e.users(1)
	s := e.service(seckill.Options{})
	v := e.onSale(s, stock)
	l := &ledger{}
	grabAll(t, s, v, users, l)
	_, err := e.db.SQL.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES (?, NOW(), NOW(), ?, ?, 'FAILED', NULL)",
		l.told[0].order, users[0], v)
	if err != nil {
		t.Fatal(err)
	}
	e.consume(s)
	e.drained(v, 20*time.Second)
	if n := e.rdb.XLen(ctx, seckill.KeysOf(e.prefix, v).Dead).Val(); n != 1 {
		t.Fatalf("%d dead letters, want the FAILED order's entry", n)
	}
	checkTold(t, e, s, v, stock, l)
	again := &ledger{}
	grabAll(t, s, v, users, again)
	if len(again.told) != 1 {
		t.Fatal("the user of a FAILED order could not buy again")
	}
	e.drained(v, 20*time.Second)
	checkTold(t, e, s, v, stock, again)
}

// TestRedisFrozenMidBatch: Redis hangs (SIGSTOP) while a batch is being written; once it
// answers again the batch is written, nothing lost, nothing waiting for ClaimIdle.
func TestRedisFrozenMidBatch(t *testing.T) {
	e, srv := privateEnv(t)
	const stock = 100
	users := e.users(50)
	s := e.service(seckill.Options{ClaimIdle: 30 * time.Second})
	v := e.onSale(s, stock)
	l := &ledger{}
	grabAll(t, s, v, users, l)
	release := e.batchWaiting(s, v, len(users))
	srv.Freeze()
	release()
	e.waitFor("the batch is inserted", 10*time.Second, func() bool { return e.dirtyRows(v) == len(users) })
	time.Sleep(1500 * time.Millisecond) // its pending check waits on the frozen Redis
	srv.Thaw()
	back := time.Now()
	e.drained(v, 10*time.Second)
	t.Logf("drained %v after Redis answered again", time.Since(back).Round(time.Millisecond))
	checkTold(t, e, s, v, stock, l)
}

// TestOrphanedEntriesAreRetriedSoon: entries delivered to this consumer by a read whose reply
// it never saw (go-redis retries a read whose connection broke, so the first delivery is
// invisible; a reply lost as Redis stops) are pending under its name, unknown to it. The
// reader finds its own entries idle for a while and writes them within seconds, not after
// ClaimIdle (30 s here).
func TestOrphanedEntriesAreRetriedSoon(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const stock = 20
		users := e.users(10)
		name := fmt.Sprintf("orphan-test-%d", time.Now().UnixNano())
		s := e.service(seckill.Options{ClaimIdle: 30 * time.Second, Consumer: name})
		v := e.onSale(s, stock)
		l := &ledger{}
		grabAll(t, s, v, users, l)
		// The lost delivery: the same consumer name reads everything, and nobody sees the reply.
		k := seckill.KeysOf(e.prefix, v)
		if err := e.rdb.XGroupCreateMkStream(ctx, k.Orders, "orders", "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
			t.Fatal(err)
		}
		got, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: name, Streams: []string{k.Orders, ">"}, Count: 100}).Result()
		if err != nil || len(got[0].Messages) != len(users) {
			t.Fatalf("orphaning read: %v, %v", got, err)
		}
		start := time.Now()
		e.consume(s)
		e.drained(v, 10*time.Second)
		took := time.Since(start)
		t.Logf("orphaned entries written %v after the consumer started", took.Round(time.Millisecond))
		if took > 6*time.Second {
			t.Errorf("orphaned entries written after %v, want a few seconds (ClaimIdle is 30 s)", took)
		}
		checkTold(t, e, s, v, stock, l)
	})
}
