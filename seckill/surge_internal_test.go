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
