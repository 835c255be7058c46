package seckill

import (
	"sync"
	"sync/atomic"
	"time"
)

// What a turn on a voucher should do besides reading new entries (voucherState.wants): set by
// the sweep (sweep.go) or by an acknowledgement that failed.
const (
	wantClaim  uint8 = 1 << iota // entries are pending: claim those idle past ClaimIdle
	wantOwn                      // look for entries pending here unseen (a read whose reply was lost)
	wantForget                   // other consumers are in the group: forget the long-gone ones
	wantRetry                    // an acknowledgement failed: write the entries pending here again
)

// voucherState is what the consumer keeps of one live voucher: no goroutine and no connection,
// a few fields. The scheduling fields are guarded by readyQueue.mu; the others belong to the
// reader holding the voucher (busy), one at a time.
type voucherState struct {
	id     int
	stream string

	// Scheduling (readyQueue.mu).
	queued bool  // in the FIFO
	busy   bool  // a reader holds it
	again  bool  // signalled while busy: back in the FIFO on release
	wants  uint8 // extra work for the next turn
	live   bool  // in the registry's live list at the supervisor's last pass
	// parkedUntil: held out of the queue until then (paced during a surge, see park); its
	// timer queues it.
	parkedUntil time.Time

	// The holder's.
	claimCursor string
	lastTurn    time.Time // the start of its last turn during a surge (pace)
	lastClaim   time.Time
	lastOwn     time.Time
	retryOwn    bool          // an outage left entries pending here, to be written first
	troubles    uint64        // readyQueue.troubles when it last looked (troubled)
	retryPause  time.Duration // backs off while retrying them keeps failing
}

// readyQueue is the consumer's fair queue of vouchers with work: a voucher is in it at most
// once, and a reader that finds more than a turn's work puts it back at the tail, so a hot
// voucher takes one reader at a time and quiet ones wait behind at most one turn per voucher
// ahead of them.
type readyQueue struct {
	lastAdmit atomic.Int64 // Unix ns of this process's latest admission (surging)
	// troubles counts the Redis failures the consumer met (see troubled).
	troubles atomic.Uint64
	mu       sync.Mutex
	cond     *sync.Cond
	fifo     []*voucherState
	states   map[int]*voucherState
	closed   bool
	keys     keyspace
}

func newReadyQueue(keys keyspace) *readyQueue {
	q := &readyQueue{states: map[int]*voucherState{}, keys: keys}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// state returns the voucher's state, created if new (q.mu held).
func (q *readyQueue) state(v int) *voucherState {
	vs := q.states[v]
	if vs == nil {
		vs = &voucherState{id: v, stream: q.keys.sale(v).Orders, claimCursor: "0-0", retryPause: minRetryPause}
		q.states[v] = vs
	}
	return vs
}

// admitted signals v for an order this process admitted at at.
func (q *readyQueue) admitted(v int, at time.Time) {
	q.lastAdmit.Store(at.UnixNano())
	q.signal(v, 0)
}

// trouble notes that the consumer met a Redis failure: every voucher's next turn writes the
// entries pending with this consumer first (troubled).
func (q *readyQueue) trouble() { q.troubles.Add(1) }

// troubled reports, for vs just taken, whether the consumer met a Redis failure since its
// last turn, and notes that it looked. A read whose reply a failover lost can leave entries
// pending here unseen when go-redis resent it and the resent read returned others: they are
// written before newer entries (which could otherwise take the database's stock first, a
// lagging replica having sold some units again) instead of after ownIdle.
func (q *readyQueue) troubled(vs *voucherState) bool {
	t := q.troubles.Load()
	if t == vs.troubles {
		return false
	}
	vs.troubles = t
	return true
}

// surging reports whether this process admitted an order in the last surgeWindow.
func (q *readyQueue) surging() bool {
	return time.Now().UnixNano()-q.lastAdmit.Load() < int64(surgeWindow)
}

// signal says voucher v has work: new entries (wants 0) or what wants asks. It costs a lock
// and no Redis command: admission calls it for every order it admits.
func (q *readyQueue) signal(v int, wants uint8) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	vs := q.state(v)
	vs.wants |= wants
	switch {
	case vs.busy:
		vs.again = true
	case !vs.parkedUntil.IsZero():
		// parked: its timer queues it
	case !vs.queued:
		vs.queued = true
		q.fifo = append(q.fifo, vs)
		q.cond.Signal()
	}
}

// take waits for a voucher with work and hands it to the caller (busy) with its wants; nil
// once the queue is closed.
func (q *readyQueue) take() (*voucherState, uint8) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.fifo) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, 0
	}
	vs := q.fifo[0]
	q.fifo[0] = nil
	q.fifo = q.fifo[1:]
	vs.queued, vs.busy, vs.again = false, true, false
	w := vs.wants
	vs.wants = 0
	return vs, w
}

// takeQuiet hands the caller, without waiting, up to n more vouchers from the queue that want
// nothing but a read of new entries (no claim, no check, no retry of their own pending
// entries): a gang turn (gang.go) writes them in one transaction. A voucher it passes over
// keeps its place.
func (q *readyQueue) takeQuiet(n int) []*voucherState {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*voucherState
	kept := q.fifo[:0]
	for i, vs := range q.fifo {
		if len(out) == n {
			kept = append(kept, q.fifo[i:]...)
			break
		}
		if vs.wants == 0 && !vs.retryOwn && vs.troubles == q.troubles.Load() {
			vs.queued, vs.busy, vs.again = false, true, false
			out = append(out, vs)
			continue
		}
		kept = append(kept, vs)
	}
	clear(q.fifo[len(kept):])
	q.fifo = kept
	return out
}

// release gives a voucher back: to the tail of the queue if more is left (or it was signalled
// meanwhile), else idle until the next signal.
func (q *readyQueue) release(vs *voucherState, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	vs.busy = false
	if (more || vs.again || vs.wants != 0) && !q.closed {
		vs.again = false
		vs.queued = true
		q.fifo = append(q.fifo, vs)
		q.cond.Signal()
	}
}

// park gives back vs, taken with work, and holds it out of the queue until until: signals
// meanwhile only add to its wants, and one timer queues it then.
func (q *readyQueue) park(vs *voucherState, until time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	vs.busy, vs.again = false, false
	vs.parkedUntil = until
	time.AfterFunc(time.Until(until), func() { q.unpark(vs) })
}

// unpark queues a parked voucher (its work is still waiting).
func (q *readyQueue) unpark(vs *voucherState) {
	q.mu.Lock()
	defer q.mu.Unlock()
	vs.parkedUntil = time.Time{}
	if q.closed || vs.busy || vs.queued || q.states[vs.id] != vs {
		return
	}
	vs.queued = true
	q.fifo = append(q.fifo, vs)
	q.cond.Signal()
}

// waiting reports whether a voucher waits for a reader.
func (q *readyQueue) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.fifo) > 0
}

// later signals v after d (a back-off), without a goroutine meanwhile.
func (q *readyQueue) later(v int, d time.Duration) {
	time.AfterFunc(d, func() { q.signal(v, 0) })
}

// setLive records the supervisor's live list and forgets the idle vouchers that left it.
func (q *readyQueue) setLive(live []int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, vs := range q.states {
		vs.live = false
	}
	for _, v := range live {
		q.state(v).live = true
	}
	for v, vs := range q.states {
		if !vs.live && !vs.busy && !vs.queued && vs.parkedUntil.IsZero() {
			delete(q.states, v)
		}
	}
}

// close wakes the readers waiting in take; they return nil.
func (q *readyQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// reopen makes a closed queue usable again (a new RunConsumer after one stopped).
func (q *readyQueue) reopen() {
	q.mu.Lock()
	q.closed = false
	q.mu.Unlock()
}

// sizes reports the live vouchers known and the vouchers waiting (for tests and metrics).
func (q *readyQueue) sizes() (known, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.states), len(q.fifo)
}
