package faults_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

// sale runs a paced sale of w.stock units to all of w.users (more users than units) from 8
// goroutines in the test process, while a surge process consumes; fault runs once a third of
// the stock is admitted (and 1.1 s have passed). It returns when every user has had a
// definite answer.
func (w *world) sale(t *testing.T, tl *tally, fault func()) {
	t.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Minute)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				w.grab(t, tl, u, deadline)
				time.Sleep(4 * time.Millisecond)
			}
		}()
	}
	faulted := make(chan struct{})
	go func() {
		defer close(faulted)
		start := time.Now()
		for tl.count() < w.stock/3 || time.Since(start) < 1100*time.Millisecond {
			time.Sleep(time.Millisecond)
		}
		fault()
	}()
	for _, u := range w.users {
		work <- u
	}
	close(work)
	wg.Wait()
	<-faulted
}

// TestRedisRestartAOF: a private Redis with AOF is restarted (same port and directory) in the
// middle of a sale that a real surge process consumes: stopped gracefully (SIGTERM) or
// crashed (SIGKILL), with appendfsync always and everysec. With `always`, and after any
// graceful stop, every grab answered "admitted" ends up in MySQL and exactly the stock is
// sold. With everysec and SIGKILL the durability model allows the last second of admissions
// to be lost: only what it promises is asserted (no oversell, no user with two orders, every
// order in MySQL was admitted to its user), and the losses are logged. A SIGKILL of the
// process leaves the AOF's unsynced writes in the OS page cache, so here they survive; only
// a machine crash loses them, which this test cannot cause. The consumer claims idle entries
// only after 30 s (the default): a batch the restart caught must be retried by its own
// consumer as soon as Redis answers again, so the backlog drains within seconds of the sale.
func TestRedisRestartAOF(t *testing.T) {
	for _, c := range []struct {
		name  string
		fsync string
		kill  bool
		full  bool // the whole no-loss promise holds
	}{
		{"always/SIGTERM", "always", false, true},
		{"always/SIGKILL", "always", true, true},
		{"everysec/SIGTERM", "everysec", false, true},
		{"everysec/SIGKILL", "everysec", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", c.fsync)
			stock := pick(3000, 20_000)
			w := newWorld(t, testenv.MySQL(t), r.Addr, stock, stock*2)
			p := startSurge(t, w.env(true, defaultClaimIdle)...)
			tl := newTally()
			var down time.Duration
			w.sale(t, tl, func() {
				start := time.Now()
				if c.kill {
					r.Kill()
				} else {
					r.Term()
				}
				time.Sleep(200 * time.Millisecond)
				r.Start()
				down = time.Since(start)
				t.Logf("Redis restarted (down %v) with %d admitted", down.Round(time.Millisecond), tl.count())
			})
			drainStart := time.Now()
			w.drained(drainWithin)
			t.Logf("backlog drained %v after the sale", time.Since(drainStart).Round(time.Millisecond))
			if !p.alive() {
				t.Fatalf("surge exited: %v", p.waitErr)
			}
			t.Logf("grab answers: %d admitted (%d learnt on a retry), %d sold out, %d failed tries (retried), %d NOT_READY",
				tl.count(), tl.learnt.Load(), tl.sold.Load(), tl.errors.Load(), tl.notReady.Load())
			if c.full {
				f := w.checkNoLoss(tl)
				if len(f.orders) != stock {
					t.Errorf("MySQL orders %d, want exactly the stock %d (demand %d)", len(f.orders), stock, len(w.users))
				}
				t.Logf("MySQL orders %d, stock %d; Redis stock %d + buyers %d", len(f.orders), f.dbStock, f.redisStock, f.buyers)
			} else {
				f := w.checkModel(tl)
				t.Logf("MySQL orders %d (FAILED %d), stock %d; Redis stock %d + buyers %d; dead letters %d",
					len(f.orders), f.failed, f.dbStock, f.redisStock, f.buyers, f.dead)
			}
			p.term()
		})
	}
}

// defaultClaimIdle is the consumer's default claim idle time; drainWithin is well under it:
// the restart tests fail if a batch caught by the restart waits to be claimed.
const (
	defaultClaimIdle = 30 * time.Second
	drainWithin      = 15 * time.Second
)

// TestRedisFlushedMidSale: FLUSHALL on a private Redis mid-sale. Grabs answer NOT_READY, a
// rebuild from MySQL follows, the sale goes on and sells exactly the stock, never more, no
// user holding two orders. The orders queued at the flush are lost with it (the documented
// durability model): each must end as a LOST order of its user.
func TestRedisFlushedMidSale(t *testing.T) {
	r := testenv.StartRedis(t)
	stock := pick(3000, 20_000)
	w := newWorld(t, testenv.MySQL(t), r.Addr, stock, stock*2)
	p := startSurge(t, w.env(true, time.Second)...)
	tl := newTally()
	var atFlush int
	w.sale(t, tl, func() {
		atFlush = tl.count()
		if err := w.rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Error(err)
		}
	})
	w.drained(2 * time.Minute)
	if !p.alive() {
		t.Fatalf("surge exited: %v", p.waitErr)
	}
	if tl.notReady.Load() == 0 {
		t.Error("no grab answered NOT_READY after the flush")
	}
	f := w.checkModel(tl)
	if len(f.orders) != stock || f.dbStock != 0 {
		t.Errorf("MySQL orders %d, stock %d; want exactly the stock %d sold (demand %d)", len(f.orders), f.dbStock, stock, len(w.users))
	}
	if f.redisStock != 0 || f.buyers != len(f.orders) {
		t.Errorf("Redis after the sale: stock %d, buyers %d; want 0 and %d", f.redisStock, f.buyers, len(f.orders))
	}
	t.Logf("flushed with %d admitted; %d NOT_READY answers; admitted %d in all; MySQL orders %d (FAILED %d); dead letters %d",
		atFlush, tl.notReady.Load(), tl.count(), len(f.orders), f.failed, f.dead)
	p.term()
}

// checkModel asserts what the durability model promises whatever Redis lost: MySQL is never
// oversold (stock + live orders = initial, stock >= 0), no user holds two live orders, every
// live order in MySQL was answered "admitted" to that user, and every order answered admitted
// that is not a live order is a LOST order of its user (lost with Redis before it was read,
// recorded by the server that told it within seconds of the rebuild) or a FAILED one (lost
// while being written): none answers nothing.
func (w *world) checkModel(tl *tally) final {
	w.t.Helper()
	var f final
	lost, silent, extra := 0, 0, 0
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		f = w.final()
		tl.mu.Lock()
		lost, silent = 0, 0
		for id, u := range tl.admitted {
			if _, ok := f.orders[id]; ok {
				continue
			}
			lost++
			if f.lost[id] != u && f.failedIDs[id] != u {
				silent++
			}
		}
		tl.mu.Unlock()
		if silent == 0 || time.Now().After(deadline) {
			break
		}
	}
	if silent != 0 {
		w.t.Errorf("%d of the %d admitted orders not live in MySQL are not recorded LOST or FAILED either: their ids answer nothing", silent, lost)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for id, u := range f.orders {
		if tl.admitted[id] != u {
			extra++
		}
	}
	if f.dbStock < 0 || f.dbStock+len(f.orders) != w.stock || len(f.orders) > w.stock {
		w.t.Errorf("MySQL oversold: stock %d, live orders %d, initial %d", f.dbStock, len(f.orders), w.stock)
	}
	if f.dupUsers != 0 {
		w.t.Errorf("%d users hold two live orders", f.dupUsers)
	}
	if extra != 0 {
		w.t.Errorf("%d orders in MySQL were never answered as admitted to their user", extra)
	}
	if f.stream != 0 || f.pending != 0 {
		w.t.Errorf("stream %d, pending %d; want 0", f.stream, f.pending)
	}
	w.t.Logf("admitted %d, of which %d are not live in MySQL (lost with Redis state: %d recorded LOST, %d FAILED)", len(tl.admitted), lost, len(f.lost), f.failed)
	return f
}
