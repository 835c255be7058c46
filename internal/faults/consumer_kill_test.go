package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

// TestConsumerSIGKILL: the order consumer runs in a real surge process that is SIGKILLed at
// random moments during a drain (20 times; SECKILL_FAULTS_LONG=1: 60) and started again each
// time, while admissions go on. Then: every admitted order is in MySQL for its user exactly
// once, MySQL holds nothing else, stock + orders add up on both sides, and the stream, the
// pending lists and the dead-letter stream are empty. Killing a client does not hurt the
// services, so this runs on the shared Redis and MariaDB (a fresh database, its own prefix).
func TestConsumerSIGKILL(t *testing.T) {
	kills := pick(20, 60)
	backlog := pick(20_000, 50_000)
	users := backlog + pick(50_000, 150_000)
	start := time.Now()
	w := newWorld(t, testenv.MySQL(t), testenv.RedisAddr(), users, users)
	t.Logf("setup (%d users): %v", users, time.Since(start).Round(time.Millisecond))

	// The backlog, admitted before any consumer runs.
	tl := newTally()
	start = time.Now()
	w.grabAll(t, tl, w.users[:backlog], 32)
	if tl.count() != backlog {
		t.Fatalf("admitted %d of the backlog, want %d", tl.count(), backlog)
	}
	t.Logf("backlog of %d admitted in %v", backlog, time.Since(start).Round(time.Millisecond))

	// More admissions while the consumers die: the queue is topped up whenever it falls
	// under 2 000, so the kills land during a drain (until the users run out).
	ctx, stopFeed := context.WithCancel(context.Background())
	var feedWG sync.WaitGroup
	feedWG.Add(1)
	go func() {
		defer feedWG.Done()
		next := backlog
		for ctx.Err() == nil && next < len(w.users) {
			if w.streamLen() >= 2000 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			end := min(next+500, len(w.users))
			w.grabAll(t, tl, w.users[next:end], 16)
			next = end
		}
	}()
	defer func() { stopFeed(); feedWG.Wait() }()

	env := w.env(true, 500*time.Millisecond)
	var midBatch, persistedBy, busy int
	start = time.Now()
	for i := range kills {
		before := w.persisted()
		p := startSurge(t, env...)
		// Let this consumer persist something (a transaction its killed predecessor left open
		// holds the voucher's row lock until MariaDB notices the closed connection), then kill
		// it tens to hundreds of milliseconds later.
		deadline := time.Now().Add(30 * time.Second)
		idle := func() bool { return w.streamLen() == 0 && w.pending() == 0 }
		for w.persisted() == before && !idle() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if w.persisted() == before && !idle() {
			t.Fatalf("kill %d: the consumer (pid %d) persisted nothing in 30 s (stream %d, pending %d)\n%s",
				i, p.pid(), w.streamLen(), w.pending(), p.log.String())
		}
		time.Sleep(time.Duration(10+rand.IntN(240)) * time.Millisecond)
		if !idle() {
			busy++
		}
		p.kill()
		persistedBy += w.persisted() - before
		// Did the dead consumer leave entries pending (read, not yet acknowledged)?
		cs, err := w.rdb.XInfoConsumers(context.Background(), w.keys.Orders, "orders").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if strings.Contains(c.Name, fmt.Sprintf("-%d-", p.pid())) && c.Pending > 0 {
				midBatch++
			}
		}
	}
	stopFeed()
	feedWG.Wait()
	t.Logf("%d kills in %v: %d with orders queued or pending, %d left orders pending with the dead consumer; %d orders persisted by the killed consumers",
		kills, time.Since(start).Round(time.Millisecond), busy, midBatch, persistedBy)

	// A last consumer, left alive, finishes the drain and stops cleanly.
	start = time.Now()
	p := startSurge(t, env...)
	w.drained(2 * time.Minute)
	p.term()
	t.Logf("final drain: %v", time.Since(start).Round(time.Millisecond))

	f := w.checkNoLoss(tl)
	t.Logf("admitted %d (%d answers learnt on a retry), MySQL orders %d, MySQL stock %d, Redis stock %d + buyers %d, dead letters %d",
		tl.count(), tl.learnt.Load(), len(f.orders), f.dbStock, f.redisStock, f.buyers, f.dead)
}
