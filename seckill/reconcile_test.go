package seckill_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// grab admits a user, waiting out NOT_READY while a rebuild runs.
func grab(t *testing.T, s *seckill.Service, user, v int) seckill.Admission {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a, err := s.Grab(context.Background(), user, v)
		if errors.Is(err, seckill.ErrNotReady) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("grab by user %d: %v", user, err)
		}
		return a
	}
}

// reconcile checks one voucher and returns its report.
func reconcile(t *testing.T, s *seckill.Service, v int, fix bool) seckill.VoucherReport {
	t.Helper()
	rs, err := s.Reconcile(context.Background(), seckill.ReconcileOptions{VoucherIDs: []int{v}, Fix: fix})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if len(rs) != 1 || rs[0].VoucherID != v {
		t.Fatalf("Reconcile of voucher %d: %+v", v, rs)
	}
	return rs[0]
}

// invariants checks what a healthy voucher satisfies with n queued orders of users holding no
// database order: Redis stock = database stock - queued, buyers = orders + queued, no user with
// two live orders.
func (e *env) invariants(v int) {
	e.t.Helper()
	st := e.state(v)
	q, err := e.rdb.XLen(context.Background(), seckill.KeysOf(e.prefix, v).Orders).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	if st.redisStock != st.dbStock-int(q) || st.buyers != st.orders+int(q) || st.dupUsers != 0 {
		e.t.Fatalf("invariants broken with %d queued: %+v", q, st)
	}
}

func TestReconcile(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		v := e.voucher(20)
		users := e.users(20)
		s := e.service(seckill.Options{})
		k := seckill.KeysOf(e.prefix, v)
		if err := s.Warm(ctx, v); err != nil {
			t.Fatal(err)
		}
		next := 0
		grabNext := func() seckill.Admission {
			t.Helper()
			a := grab(t, s, users[next], v)
			next++
			return a
		}

		// A clean sale, drained.
		for range 4 {
			grabNext()
		}
		stop := e.consume(s)
		e.drained(v, 10*time.Second)
		stop()
		r := reconcile(t, s, v, false)
		if !r.OK() || r.Result != seckill.ReconcileOK || !r.Ready || !r.Registered || r.DBStock != 16 || r.DBOrders != 4 ||
			r.RedisStock == nil || *r.RedisStock != 16 || r.ExpectedStock != 16 || r.Buyers != 4 || r.ExpectedBuyers != 4 || r.Queued != 0 {
			t.Fatalf("clean drained sale: %+v", r)
		}
		// The default selection finds it (a fresh database, a prefix of its own).
		all, err := s.Reconcile(ctx, seckill.ReconcileOptions{})
		if err != nil || len(all) != 1 || all[0].VoucherID != v || !all[0].OK() {
			t.Fatalf("default selection: %+v %v", all, err)
		}

		// Orders admitted and not yet persisted (no consumer) are not problems.
		grabNext()
		grabNext()
		r = reconcile(t, s, v, false)
		if !r.OK() || r.Queued != 2 || r.DBStock != 16 || r.ExpectedStock != 14 || *r.RedisStock != 14 ||
			r.Buyers != 6 || r.ExpectedBuyers != 6 || r.DBOrders != 4 {
			t.Fatalf("with 2 queued orders: %+v", r)
		}

		breakages := []struct {
			name  string
			do    func()
			check func(r seckill.VoucherReport) bool
			want  string
		}{
			{"stock altered", func() { rdb.Set(ctx, k.Stock, 99, 0) },
				func(r seckill.VoucherReport) bool { return *r.RedisStock == 99 && r.ExpectedStock == 14 },
				"Redis stock 99, expected 14"},
			{"buyer removed", func() { rdb.HDel(ctx, k.Buyers, itoa(users[0])) },
				func(r seckill.VoucherReport) bool { return r.MissingBuyers == 1 && r.ExtraBuyers == 0 },
				"1 missing, 0 extra, 0 with another order"},
			{"queued buyer removed", func() { rdb.HDel(ctx, k.Buyers, itoa(users[next-1])) },
				func(r seckill.VoucherReport) bool { return r.MissingBuyers == 1 },
				"1 missing"},
			{"extra buyer", func() { rdb.HSet(ctx, k.Buyers, itoa(users[19]), "12345") },
				func(r seckill.VoucherReport) bool { return r.ExtraBuyers == 1 && r.MissingBuyers == 0 },
				"0 missing, 1 extra"},
			{"buyer with another order", func() { rdb.HSet(ctx, k.Buyers, itoa(users[1]), "777") },
				func(r seckill.VoucherReport) bool { return r.MismatchedBuyers == 1 },
				"1 with another order"},
			{"meta altered", func() { rdb.HSet(ctx, k.Meta, "on", "0") },
				func(r seckill.VoucherReport) bool { return r.Ready }, "meta (begin"},
			{"unregistered", func() { rdb.ZRem(ctx, e.prefix+":vouchers", itoa(v)) },
				func(r seckill.VoucherReport) bool { return !r.Registered }, "not registered"},
			{"stock key deleted", func() { rdb.Del(ctx, k.Stock) },
				func(r seckill.VoucherReport) bool { return r.RedisStock == nil }, "stock " + k.Stock + " missing"},
			{"meta deleted", func() { rdb.Del(ctx, k.Meta) },
				func(r seckill.VoucherReport) bool { return !r.Ready }, "Redis still holds part of its state"},
		}
		for _, b := range breakages {
			before := e.state(v)
			b.do()
			r := reconcile(t, s, v, false)
			if r.OK() || r.Result != seckill.ReconcileProblem || !b.check(r) || !strings.Contains(strings.Join(r.Problems, "\n"), b.want) {
				t.Fatalf("%s: report %+v, want a problem saying %q", b.name, r, b.want)
			}
			if len(r.Problems) != 1 {
				t.Errorf("%s: %d problems, want 1: %q", b.name, len(r.Problems), r.Problems)
			}
			// Without Fix nothing changed.
			if after := e.state(v); b.name == "stock altered" && after.redisStock != 99 {
				t.Fatalf("%s: the check without Fix changed Redis: %+v -> %+v", b.name, before, after)
			}
			r = reconcile(t, s, v, true)
			if !r.OK() || !r.Fixed || r.Result != seckill.ReconcileFixed || len(r.Found) == 0 || r.FixError != "" {
				t.Fatalf("%s: after Fix: %+v", b.name, r)
			}
			e.invariants(v)
			if a := grabNext(); a.Status != seckill.StatusQueued {
				t.Fatalf("%s: grab after the fix: %+v", b.name, a)
			}
			if r := reconcile(t, s, v, false); !r.OK() {
				t.Fatalf("%s: after the fix and a grab: %+v", b.name, r)
			}
		}

		// Redis loses the voucher altogether, registry included (after the queue drained, so no
		// order is lost).
		stop = e.consume(s)
		e.drained(v, 10*time.Second)
		stop()
		if err := rdb.Del(ctx, k.Meta, k.Stock, k.Buyers, k.Orders, k.Dead).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.ZRem(ctx, e.prefix+":vouchers", itoa(v))
		r = reconcile(t, s, v, false)
		if r.OK() || r.Ready || !strings.Contains(strings.Join(r.Problems, "\n"), "not ready") ||
			!strings.Contains(strings.Join(r.Problems, "\n"), "Redis lost it") {
			t.Fatalf("flushed voucher: %+v", r)
		}
		r = reconcile(t, s, v, true)
		st := e.state(v)
		if !r.Fixed || !r.Ready || *r.RedisStock != int64(st.dbStock) || r.Buyers != st.orders || st.orders != next {
			t.Fatalf("flushed voucher after Fix: %+v, state %+v, %d grabs", r, st, next)
		}
		e.invariants(v)
		grabNext()
		stop = e.consume(s)
		e.drained(v, 10*time.Second)
		stop()
		if r := reconcile(t, s, v, false); !r.OK() || r.DBOrders != next || r.DBStock != 20-next {
			t.Fatalf("after the last grab, drained: %+v", r)
		}
	})
}

// An order written to the database whose stream entry was not acknowledged (Redis failed
// after the commit) is not counted as queued; Fix settles it before rebuilding, so the
// rebuild does not take its unit off sale a second time.
func TestReconcilePersistedNotAcknowledged(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		v := e.voucher(10)
		users := e.users(3)
		s := e.service(seckill.Options{})
		k := seckill.KeysOf(e.prefix, v)
		if err := s.Warm(ctx, v); err != nil {
			t.Fatal(err)
		}
		a := grab(t, s, users[0], v)
		grab(t, s, users[1], v)
		// What the consumer's transaction does for users[0]'s order, without the XACK/XDEL.
		if _, err := e.db.SQL.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES (?, NOW(), NOW(), ?, ?, 'CREATED', 1)",
			a.OrderID, users[0], v); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.SQL.ExecContext(ctx, "UPDATE vouchers SET stock = stock - 1 WHERE id = ?", v); err != nil {
			t.Fatal(err)
		}
		r := reconcile(t, s, v, false)
		if !r.OK() || r.Queued != 2 || r.QueuedPersisted != 1 || r.DBStock != 9 || r.ExpectedStock != 8 || *r.RedisStock != 8 ||
			!strings.Contains(strings.Join(r.Notes, "\n"), "already in the database") {
			t.Fatalf("persisted, not acknowledged: %+v", r)
		}
		rdb.Set(ctx, k.Stock, 3, 0)
		r = reconcile(t, s, v, true)
		if !r.Fixed || r.Queued != 1 || r.QueuedPersisted != 0 || *r.RedisStock != 8 {
			t.Fatalf("after Fix: %+v", r)
		}
		e.consume(s)
		e.drained(v, 10*time.Second)
		if r := reconcile(t, s, v, false); !r.OK() || r.DBOrders != 2 || r.DBStock != 8 || *r.RedisStock != 8 {
			t.Fatalf("drained: %+v", r)
		}
		e.invariants(v)
	})
}

// Grabs and the consumer run while Reconcile checks: orders admitted during a check are
// never reported as differences.
func TestReconcileDuringSale(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		users := e.users(3000)
		s := e.service(seckill.Options{BatchSize: 20})
		v := e.onSale(s, 5000)
		e.consume(e.service(seckill.Options{BatchSize: 20}))
		var wg sync.WaitGroup
		gctx, cancel := context.WithCancel(ctx)
		defer func() { cancel(); wg.Wait() }() // also when a check fails the test
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(users) && gctx.Err() == nil; i += 8 {
					if _, err := s.Grab(gctx, users[i], v); err != nil && gctx.Err() == nil {
						t.Errorf("grab: %v", err)
						return
					}
				}
			}()
		}
		checks := 0
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for running := true; running; checks++ {
			select {
			case <-done:
				running = false
			default:
			}
			if r := reconcile(t, s, v, false); !r.OK() {
				t.Fatalf("check %d during the sale: %q", checks, r.Problems)
			}
		}
		e.drained(v, 10*time.Second)
		r := reconcile(t, s, v, false)
		if !r.OK() || r.DBOrders != len(users) || r.DBStock != 5000-len(users) || *r.RedisStock != int64(r.DBStock) {
			t.Fatalf("after the sale: %+v", r)
		}
		t.Logf("%d checks during the sale", checks)
	})
}

// Problems in the database are reported and left alone by Fix; unknown vouchers are problems.
func TestReconcileDatabaseProblems(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	ctx := context.Background()
	users := e.users(3)
	s := e.service(seckill.Options{})
	v := e.onSale(s, 10)
	// The schema forbids what follows: drop its guards the way an old MySQL (no CHECK) or a
	// hand-made table would lack them.
	for _, q := range []string{
		"ALTER TABLE vouchers DROP CONSTRAINT voucher_stock_non_negative",
		"ALTER TABLE tb_voucher_order ADD INDEX by_user (user_id), DROP INDEX seckillorder_user_id_voucher_id_slot",
		"UPDATE vouchers SET stock = -1 WHERE id = ?",
		"INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES (101, NOW(), NOW(), ?, ?, 'CREATED', 1), (102, NOW(), NOW(), ?, ?, 'CREATED', 1), (103, NOW(), NOW(), ?, ?, 'CREATED', NULL)",
	} {
		var args []any
		switch {
		case strings.HasPrefix(q, "UPDATE"):
			args = []any{v}
		case strings.HasPrefix(q, "INSERT"):
			args = []any{users[0], v, users[0], v, users[1], v}
		}
		if _, err := e.db.SQL.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r := reconcile(t, s, v, true)
	all := strings.Join(r.Problems, "\n")
	for _, want := range []string{"stock -1 is negative", "1 users hold more than one live order", "1 live orders hold no slot"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems %q lack %q", r.Problems, want)
		}
	}
	// Fix repaired the Redis side (the buyers the database has, the stock clamped to 0) and
	// left the database's problems.
	if r.Fixed || r.Result != seckill.ReconcileProblem || len(r.Found) <= len(r.Problems) || r.FixError != "" {
		t.Errorf("database problems: after Fix %+v", r)
	}
	for _, p := range r.Problems {
		if !strings.HasPrefix(p, "database: ") {
			t.Errorf("after Fix, a problem outside the database is left: %q", p)
		}
	}

	// On sale, never warmed, no order: not a problem (the first grab warms it).
	cold := e.voucher(5)
	if r := reconcile(t, s, cold, false); !r.OK() || r.Ready || !strings.Contains(strings.Join(r.Notes, "\n"), "not warmed yet") {
		t.Errorf("never warmed voucher: %+v", r)
	}
	// Ended, its keys gone: not a problem either.
	ended := e.voucherWindow(5, time.Now().Add(-3*time.Hour), time.Now().Add(-2*time.Hour))
	if r := reconcile(t, s, ended, false); !r.OK() || r.Ready {
		t.Errorf("ended voucher not in Redis: %+v", r)
	}

	r = reconcile(t, s, 999_999_999, false)
	if r.OK() || r.Seckill || !strings.Contains(strings.Join(r.Problems, "\n"), "no seckill voucher") {
		t.Errorf("unknown voucher: %+v", r)
	}

	syncSvc := e.service(seckill.Options{Strategy: seckill.StrategySync})
	r = reconcile(t, syncSvc, v, false)
	if r.RedisChecked || r.Ready || r.DBOrders != 3 || !strings.Contains(strings.Join(r.Notes, "\n"), "strategy sync") ||
		!strings.Contains(strings.Join(r.Problems, "\n"), "negative") {
		t.Errorf("sync strategy: %+v", r)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRebuildsDuringDrain: full rebuilds and warms run over and over while users grab and two
// consumers (other "processes") write batches. A rebuild reads the database stock and the
// stream under the voucher's row lock, the lock every batch commit takes, so each batch is
// counted exactly once: at the end Redis and the database agree and nothing is oversold.
// (Without the row lock in the rebuild this fails: a batch committed between the rebuild's
// read of the database and its count of the stream is subtracted twice or not at all.)
func TestRebuildsDuringDrain(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const stock = 2000
		users := e.users(2500)
		s := e.service(seckill.Options{})
		v := e.onSale(s, stock)
		e.consume(e.service(seckill.Options{BatchSize: 30}))
		e.consume(e.service(seckill.Options{BatchSize: 30}))
		var wg sync.WaitGroup
		admitted := make([]int64, len(users))
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(users); i += 8 {
					for {
						a, err := s.Grab(ctx, users[i], v)
						if errors.Is(err, seckill.ErrNotReady) {
							time.Sleep(time.Millisecond) // a full rebuild is running
							continue
						}
						if err == nil {
							admitted[i] = a.OrderID
						} else if !errors.Is(err, seckill.ErrSoldOut) {
							t.Errorf("grab: %v", err)
						}
						break
					}
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		rebuilds := 0
		for running := true; running; rebuilds++ {
			select {
			case <-done:
				running = false
			default:
			}
			var err error
			if rebuilds%2 == 0 {
				err = s.Rebuild(ctx, v)
			} else {
				err = s.Warm(ctx, v)
			}
			if err != nil {
				t.Fatalf("rebuild %d: %v", rebuilds, err)
			}
		}
		e.drained(v, 20*time.Second)
		n := 0
		for _, id := range admitted {
			if id != 0 {
				n++
			}
		}
		st := e.state(v)
		if n != stock || st.orders != stock || st.dbStock != 0 || st.redisStock != 0 || st.buyers != stock || st.dupUsers != 0 {
			t.Fatalf("after %d rebuilds: %d admitted, state %+v; want %d orders and both stocks 0", rebuilds, n, st, stock)
		}
		if r := reconcile(t, s, v, false); !r.OK() {
			t.Fatalf("reconcile: %q", r.Problems)
		}
		t.Logf("%d rebuilds during the sale", rebuilds)
	})
}
