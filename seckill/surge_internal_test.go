package seckill

import (
	"testing"
	"time"
)

// While this process admits orders, new entries are read surgeBatchSize at a time (so that a
// read holds Redis for less time than the admissions queued behind it can bear), and a read
// that returned that many counts as full (more may wait); once admissions stop for
// surgeWindow, reads take BatchSize again.
func TestReadsAreShorterDuringASurge(t *testing.T) {
	q := newReadyQueue(keyspace{})
	c := &consumer{ready: q, opts: consumerOptions{batchSize: 500}}
	if n := c.readCount(); n != 500 {
		t.Fatalf("no admission yet: read count %d, want 500", n)
	}
	q.admitted(7, time.Now())
	if n := c.readCount(); n != surgeBatchSize {
		t.Fatalf("just admitted: read count %d, want %d", n, surgeBatchSize)
	}
	if !c.fullRead(surgeBatchSize) || c.fullRead(surgeBatchSize-1) {
		t.Errorf("fullRead(%d) = %v, fullRead(%d) = %v; want true, false", surgeBatchSize, c.fullRead(surgeBatchSize), surgeBatchSize-1, c.fullRead(surgeBatchSize-1))
	}
	if vs, _ := q.take(); vs == nil || vs.id != 7 {
		t.Errorf("admitted did not signal voucher 7: took %v", vs)
	}
	time.Sleep(surgeWindow + 20*time.Millisecond)
	if n := c.readCount(); n != 500 {
		t.Errorf("after the surge: read count %d, want 500", n)
	}
	small := &consumer{ready: q, opts: consumerOptions{batchSize: 10}}
	q.admitted(7, time.Now())
	if n := small.readCount(); n != 10 || !small.fullRead(10) || small.fullRead(9) {
		t.Errorf("BatchSize 10 during a surge: read count %d, fullRead(10) %v, fullRead(9) %v; want 10, true, false", n, small.fullRead(10), small.fullRead(9))
	}
}

// While this process admits orders, a voucher gets a turn at most every surgePace: taken
// again sooner, it is parked (its signals meanwhile do not queue it) and queued once its pace
// is up; without a surge, or for a turn that has more to do than read (a claim, a retry), no
// pace.
func TestTurnsArePacedDuringASurge(t *testing.T) {
	q := newReadyQueue(keyspace{})
	c := &consumer{ready: q}
	q.signal(7, 0)
	vs, _ := q.take()
	if c.paced(vs) {
		t.Fatal("no admission: a turn was paced")
	}
	q.release(vs, false)

	q.admitted(7, time.Now())
	vs, _ = q.take()
	if c.paced(vs) {
		t.Fatal("the first turn of a surge was paced")
	}
	began := time.Now()
	q.release(vs, false)
	q.admitted(7, time.Now())
	vs, _ = q.take()
	if !c.paced(vs) {
		t.Fatal("a second turn right after the first was not paced")
	}
	for range 5 {
		q.admitted(7, time.Now()) // signals while parked
	}
	if _, waiting := q.sizes(); waiting != 0 {
		t.Fatalf("signals queued a parked voucher: %d waiting", waiting)
	}
	q.admitted(7, time.Now()) // still surging when it comes back
	vs, _ = q.take()          // blocks until the timer queues it
	if waited := time.Since(began); waited < surgePace-5*time.Millisecond || waited > surgePace+200*time.Millisecond {
		t.Errorf("queued again %v after the last turn began, want about %v", waited, surgePace)
	}
	if vs.id != 7 || c.paced(vs) {
		t.Fatalf("after its pace: took %d, paced %v", vs.id, c.paced(vs))
	}
	q.release(vs, false)

	q.signal(7, wantClaim)
	vs, wants := q.take()
	if wants != wantClaim {
		t.Fatalf("wants %d, want %d", wants, wantClaim)
	}
	// The reader paces only a turn that wants nothing but new entries (run checks wants).
	q.release(vs, false)
	time.Sleep(surgeWindow + 20*time.Millisecond)
	q.signal(7, 0)
	vs, _ = q.take()
	if c.paced(vs) {
		t.Error("after the surge: a turn was paced")
	}
}

// After the consumer meets a Redis failure, each voucher's next turn writes its own pending
// entries first (troubled, once per failure seen), and a gang turn, which reads only new
// entries, does not take a voucher that has not looked yet.
func TestTurnsAfterARedisFailureRetryOwnEntriesFirst(t *testing.T) {
	q := newReadyQueue(keyspace{})
	q.signal(1, 0)
	vs, _ := q.take()
	if q.troubled(vs) {
		t.Fatal("no failure yet: troubled")
	}
	q.release(vs, false)
	q.trouble()
	q.signal(2, 0)
	q.signal(1, 0)
	first, _ := q.take() // 2
	if quiet := q.takeQuiet(5); len(quiet) != 0 {
		t.Fatalf("a gang took %d vouchers that had not looked at the failure", len(quiet))
	}
	if !q.troubled(first) || q.troubled(first) {
		t.Fatal("troubled: want true once per failure")
	}
	q.release(first, false)
	other, _ := q.take() // 1
	if other.id != 1 || !q.troubled(other) {
		t.Fatalf("took %d: want voucher 1, troubled", other.id)
	}
	q.release(other, false)
	q.signal(1, 0)
	q.signal(2, 0)
	vs, _ = q.take()
	if quiet := q.takeQuiet(5); len(quiet) != 1 {
		t.Fatalf("after looking: a gang took %d vouchers, want 1", len(quiet))
	}
}
