package seckill_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// Issue 22's seckill repro, with the real clock: on an empty Redis, server 0 admits users at
// the start of a second (the first order ids of an empty Redis are fenced), Redis is flushed
// within that same second, and server 1 admits other users. The order id counter starts again
// from nothing; without a durable fence it fenced to the same second and told server 0's ids
// to server 1's users. Then:
//
//   - persisted: server 0's orders were written before the flush;
//   - queued: they were not (no consumer ran): the flush took them with the backlog, and
//     server 0, which told them, records them LOST;
//   - queued, server gone: as queued, but server 0 is gone before the rebuild: Order infers
//     the loss from the id and the counter's durable fence (ErrOrderLost).
//
// No id may be told to two users; every id told ends as the user's visible order or as a
// visible LOST (a LOST row, or ErrOrderLost); reconcile finds the voucher OK.
func TestNoOrderIDToldTwiceAfterFlushInTheFenceSecond(t *testing.T) {
	for _, c := range []struct {
		name              string
		persisted, closed bool
	}{{"persisted", true, false}, {"queued", false, false}, {"queued-server-gone", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			testToldTwiceAfterFlush(t, c.persisted, c.closed)
		})
	}
}

func testToldTwiceAfterFlush(t *testing.T, persisted, closeFirst bool) {
	ctx := context.Background()
	var (
		e      *env
		s0, s1 *seckill.Service
		v      int
		users  []int
		l      *ledger
	)
	const stock, each = 1000, 60
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("the grabs and the flush never fitted in one Redis second in 5 attempts")
		}
		e, _ = privateEnv(t)
		s0, s1 = e.service(seckill.Options{}), e.service(seckill.Options{})
		users = e.users(2 * each)
		v = e.onSale(s0, stock)
		if persisted {
			e.consume(s0)
		}
		l = &ledger{}
		// Start 20 ms into a second of Redis's clock (this machine's).
		now, err := e.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
		first := e.rdb.Time(ctx).Val().Unix()
		grabAll(t, s0, v, users[:each], l)
		if persisted {
			e.drained(v, time.Second)
		}
		if err := e.rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if e.rdb.Time(ctx).Val().Unix() == first {
			break
		}
		t.Logf("attempt %d: the flush came in the next second; again", attempt)
	}
	if closeFirst {
		_ = s0.Close() // gone before the rebuild: it can record nothing LOST
	}
	grabAll(t, s1, v, users[each:], l)
	e.consume(s1)
	e.drained(v, 20*time.Second)

	byID := map[int64]int{}
	for _, x := range l.told {
		if u, ok := byID[x.order]; ok && u != x.user {
			t.Errorf("order id %d told to users %d and %d", x.order, u, x.user)
		}
		byID[x.order] = x.user
	}
	if len(l.told) != 2*each {
		t.Fatalf("%d admissions told, want %d", len(l.told), 2*each)
	}
	// Every id told ends as the user's order (persisted: all of them) or as a visible loss.
	created, lost := 0, 0
	deadline := time.Now().Add(15 * time.Second)
	for _, x := range l.told {
		for {
			o, err := s1.Order(ctx, x.user, x.order)
			switch {
			case errors.Is(err, seckill.ErrOrderLost) && closeFirst:
				lost++
			case errors.Is(err, seckill.ErrOrderLost) && time.Now().Before(deadline):
				// Inferred at once; server 0 records the LOST row within a second or two.
				time.Sleep(50 * time.Millisecond)
				continue
			case err != nil:
				t.Fatalf("order(%d) of user %d: %v", x.order, x.user, err)
			case o != nil && o.Status == seckillorder.StatusLOST && !closeFirst:
				lost++
			case o != nil && o.Status == seckillorder.StatusCREATED && o.UserID == x.user && o.VoucherID == v:
				created++
			case time.Now().Before(deadline):
				time.Sleep(50 * time.Millisecond) // the LOST row comes within a second or two
				continue
			default:
				t.Fatalf("user %d was told order %d: order(%d) = %+v, %v", x.user, x.order, x.order, o, err)
			}
			break
		}
	}
	wantLost := each
	if persisted {
		wantLost = 0
	}
	if lost != wantLost || created != 2*each-wantLost {
		t.Fatalf("%d orders created, %d lost; want %d and %d", created, lost, 2*each-wantLost, wantLost)
	}
	// The lost users' units are back on sale: each grabs again and gets a new order.
	if !persisted {
		for _, x := range l.told[:each] {
			a, err := grabReady(t, s1, x.user, v)
			if err != nil || a.OrderID == x.order {
				t.Fatalf("user %d, whose order %d was lost, grabs again: %+v %v", x.user, x.order, a, err)
			}
		}
		e.drained(v, 20*time.Second)
	}
	st := e.state(v)
	if st.dbStock+st.orders != stock || st.dupUsers != 0 || st.orders != 2*each {
		t.Fatalf("database: %+v; want stock + live orders = %d, %d live orders, no user twice", st, stock, 2*each)
	}
	e.reconciled(s1, v)
	if !persisted && !closeFirst {
		r, err := s1.Reconcile(ctx, seckill.ReconcileOptions{VoucherIDs: []int{v}})
		if err != nil || r[0].DBLost != each {
			t.Fatalf("reconcile lists %d LOST orders (%v), want %d", r[0].DBLost, err, each)
		}
	}
}

// The orders a server told are remembered only until they are written: the memory held is the
// backlog plus a few seconds, and nothing once the consumer has caught up.
func TestToldOrdersAreForgottenOnceWritten(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	s := e.service(seckill.Options{})
	v := e.onSale(s, 100)
	l := &ledger{}
	grabAll(t, s, v, e.users(80), l)
	if n := seckill.ToldRemembered(s); n != 80 {
		t.Fatalf("%d orders remembered after 80 admissions, want 80", n)
	}
	time.Sleep(3 * time.Second) // no consumer: still unwritten, still remembered
	if n := seckill.ToldRemembered(s); n != 80 {
		t.Fatalf("%d orders remembered while unwritten, want 80", n)
	}
	e.consume(s)
	e.drained(v, 20*time.Second)
	e.waitFor("the written orders forgotten", 10*time.Second, func() bool { return seckill.ToldRemembered(s) == 0 })
}
