package faults_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

// TestMariaDBOutage: a private MariaDB is stopped (SIGTERM) mid-drain for 8 s (30 s with
// SECKILL_FAULTS_LONG=1) under a real surge server that runs the consumer, while grabs go on.
// During the outage the server stays up, /healthz answers 503 naming the database, grabs
// (Redis only) are admitted and queue up, nothing is dead-lettered. Once MariaDB is back the
// backlog drains: every admitted order is in MySQL once, nothing lost, /healthz 200.
func TestMariaDBOutage(t *testing.T) {
	outage := pick(8*time.Second, 30*time.Second)
	m := testenv.PrivateMySQL(t)
	r := testenv.StartRedis(t)
	const users = 40_000
	w := newWorld(t, m.DSN, r.Addr, users, users)
	p := startSurge(t, w.env(true, time.Second)...)

	tl := newTally()
	// A backlog first, then a steady trickle of grabs (200 every 50 ms) until stopped.
	w.grabAll(t, tl, w.users[:10_000], 32)
	ctx, stopFeed := context.WithCancel(context.Background())
	var feedWG sync.WaitGroup
	var next atomic.Int64
	next.Store(10_000)
	feedWG.Add(1)
	go func() {
		defer feedWG.Done()
		for ctx.Err() == nil && int(next.Load()) < len(w.users) {
			n := int(next.Load())
			end := min(n+200, len(w.users))
			w.grabAll(t, tl, w.users[n:end], 16)
			next.Store(int64(end))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { stopFeed(); feedWG.Wait() }()

	// Mid-drain: some orders persisted, some still queued.
	deadline := time.Now().Add(time.Minute)
	for w.persisted() == 0 || w.streamLen() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no drain in progress after a minute: persisted %d, queued %d", w.persisted(), w.streamLen())
		}
		time.Sleep(2 * time.Millisecond)
	}
	persistedAtDown, queuedAtDown := w.persisted(), w.streamLen()
	m.Stop()
	down := time.Now()
	atDown := tl.count()
	t.Logf("MariaDB stopped with %d orders persisted, %d queued; %d admitted so far", persistedAtDown, queuedAtDown, atDown)

	checks, bad := 0, 0
	for time.Since(down) < outage {
		time.Sleep(500 * time.Millisecond)
		if !p.alive() {
			t.Fatalf("surge exited during the database outage: %v\n%s", p.waitErr, p.log.String())
		}
		code, body, err := p.health()
		checks++
		if err != nil || code != http.StatusServiceUnavailable || body["database"] != "down" || body["redis"] != "ok" {
			bad++
			t.Errorf("/healthz during the outage: %d %v %v; want 503 with database down, redis ok", code, body, err)
		}
	}
	duringOutage := tl.count() - atDown
	queued, dead := w.streamLen(), w.dead()
	t.Logf("outage of %v: /healthz checked %d times (%d wrong); %d grabs admitted meanwhile; %d orders queued; %d dead letters",
		time.Since(down).Round(time.Millisecond), checks, bad, duringOutage, queued, dead)
	if duringOutage == 0 {
		t.Error("no grab was admitted during the database outage")
	}
	if dead != 0 {
		t.Errorf("%d orders dead-lettered during the outage", dead)
	}
	if queued < int64(duringOutage) {
		t.Errorf("the stream holds %d orders, fewer than the %d admitted during the outage", queued, duringOutage)
	}

	m.Start()
	back := time.Now()
	time.Sleep(time.Second) // the sale goes on as the database returns
	stopFeed()
	feedWG.Wait()
	w.drained(2 * time.Minute)
	t.Logf("backlog drained %v after MariaDB returned", time.Since(back).Round(time.Millisecond))
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body, err := p.health()
		if err == nil && code == http.StatusOK && body["database"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz after the outage: %d %v %v", code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f := w.checkNoLoss(tl)
	t.Logf("admitted %d, MySQL orders %d, MySQL stock %d, Redis stock %d + buyers %d, dead letters %d",
		tl.count(), len(f.orders), f.dbStock, f.redisStock, f.buyers, f.dead)
	p.term()
}
