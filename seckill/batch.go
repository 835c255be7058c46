package seckill

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/autopipe"
	"github.com/surgekit/surge/lua"
)

// Concurrent grabs share admission-script calls: whatever grabs are waiting when a batcher
// worker becomes free go out together, one script call per voucher (up to perCall users) and
// all calls in one pipeline. Under load a script run admits many users and Redis pays its
// per-call costs (the read and write of the request, the script's setup, the voucher's meta
// and stock) once per batch instead of once per grab.
//
// A grab that finds no other grab in flight (no batch, no grab on its own) goes out at once
// from the caller's goroutine (the inline slot), as an unbatched call would: no hand-off to a
// worker and back, each of which is a wait in the scheduler's run queue when the CPUs are
// busy. Grabs that arrive meanwhile go to the workers as before, so under load grabs still
// share script calls.
const (
	perFlush = 1024 // grabs one worker sends at once
	perCall  = 128  // grabs in one script call: bounds how long one run blocks Redis
	// batchTimeout bounds one flush's round trip; a grab whose ctx ends sooner returns then.
	batchTimeout = 10 * time.Second
)

// grabCall is one grab waiting in a batch.
type grabCall struct {
	voucher int
	user    int
	order   int64
	until   time.Time // its caller's deadline (zero: none)
	res     lua.GrabReply
	err     error
	done    chan struct{}
}

type batcher struct {
	rdb     redis.UniversalClient
	keys    keyspace
	clock   func() time.Time
	reqs    chan *grabCall
	quit    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	timeout time.Duration
	inline  autopipe.Inline
	calls   atomic.Int64 // script calls sent (for tests)
	acks    *replicaAcks // nil: answers without replica acknowledgements (replicaack.go)
}

func newBatcher(rdb redis.UniversalClient, keys keyspace, clock func() time.Time, workers int, acks *replicaAcks) *batcher {
	b := &batcher{rdb: rdb, keys: keys, clock: clock, reqs: make(chan *grabCall), quit: make(chan struct{}), timeout: batchTimeout, acks: acks}
	for i := 0; i < workers; i++ {
		b.wg.Add(1)
		go b.work()
	}
	return b
}

// close stops the workers after the batches in flight; later grabs get ErrClosed.
func (b *batcher) close() {
	b.once.Do(func() { close(b.quit) })
	b.wg.Wait()
}

// admit sends one grab, on its own if the inline slot is free, else with the next batch, and
// waits for its reply or ctx's end.
func (b *batcher) admit(ctx context.Context, voucherID int, req lua.GrabRequest) (lua.GrabReply, error) {
	if err := ctx.Err(); err != nil {
		return lua.GrabReply{}, err
	}
	if b.inline.Take() {
		defer b.inline.Release()
		return b.admitNow(ctx, voucherID, req)
	}
	c := &grabCall{voucher: voucherID, user: req.User, order: req.Order, until: deadlineOf(ctx), done: make(chan struct{})}
	select {
	case b.reqs <- c:
	case <-ctx.Done():
		return lua.GrabReply{}, ctx.Err()
	case <-b.quit:
		return lua.GrabReply{}, ErrClosed
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return lua.GrabReply{}, ctx.Err()
	}
}

// admitNow sends one grab from the caller's goroutine, bounded by ctx and the batch timeout.
// As for a batched grab whose caller gave up, a grab cut off by ctx may have been admitted.
func (b *batcher) admitNow(ctx context.Context, voucherID int, req lua.GrabRequest) (lua.GrabReply, error) {
	select {
	case <-b.quit:
		return lua.GrabReply{}, ErrClosed // as the batched path answers after close
	default:
	}
	callCtx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	b.calls.Add(1)
	var r lua.GrabReply
	var err error
	if b.acks != nil {
		r, err = b.acks.grabOne(callCtx, voucherID, b.clock(), req)
	} else {
		r, err = grabAlone(callCtx, b.rdb, b.keys.script(voucherID), b.clock(), req)
	}
	if err != nil && ctx.Err() != nil {
		return lua.GrabReply{}, ctx.Err() // the caller's end, as a batched grab reports it
	}
	return r, err
}

// grabAlone runs the admission script for one grab, in a call of its own.
func grabAlone(ctx context.Context, rdb redis.Scripter, keys lua.SeckillKeys, now time.Time, req lua.GrabRequest) (lua.GrabReply, error) {
	r, err := lua.Grab(ctx, rdb, keys, now, []lua.GrabRequest{req})
	if err != nil {
		return lua.GrabReply{}, err
	}
	return r[0], nil
}

func (b *batcher) work() {
	defer b.wg.Done()
	batch := make([]*grabCall, 0, perFlush)
	for {
		var ok bool
		if batch, ok = autopipe.Gather(b.reqs, b.quit, batch); !ok {
			return
		}
		b.flush(batch)
	}
}

// scriptCall is one admission-script call of a flush: grabs of one voucher.
type scriptCall struct {
	voucher int
	keys    lua.SeckillKeys
	reqs    []lua.GrabRequest
	grabs   []*grabCall
	sent    *lua.QueuedGrab
	replies []lua.GrabReply
	err     error // of the call: no reply
	ackErr  error // the replicas did not acknowledge the call (replicaack.go)
}

// reply is the answer to the call's i-th grab: the script's reply, or the call's error, or,
// for a reply that would tell its user an order, the replicas' failure to acknowledge it.
func (c *scriptCall) reply(i int) (lua.GrabReply, error) {
	if c.err != nil {
		return lua.GrabReply{}, c.err
	}
	if c.ackErr != nil && tellsOrder(c.replies[i].Outcome) {
		return lua.GrabReply{}, c.ackErr
	}
	return c.replies[i], nil
}

func (b *batcher) flush(batch []*grabCall) {
	b.inline.Flushing()
	defer b.inline.Flushed()
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	now := b.clock()

	// One call per voucher (per perCall grabs), in arrival order within a voucher.
	var calls []*scriptCall
	open := map[int]*scriptCall{}
	var until time.Time // the latest deadline of the grabs (zero: one has none)
	for i, g := range batch {
		c := open[g.voucher]
		if c == nil || len(c.grabs) == perCall {
			c = &scriptCall{voucher: g.voucher, keys: b.keys.script(g.voucher)}
			open[g.voucher] = c
			calls = append(calls, c)
		}
		c.reqs = append(c.reqs, lua.GrabRequest{User: g.user, Order: g.order})
		c.grabs = append(c.grabs, g)
		if i == 0 || (!until.IsZero() && (g.until.IsZero() || g.until.After(until))) {
			until = g.until
		}
	}
	b.calls.Add(int64(len(calls)))

	if b.acks != nil {
		b.acks.grabs(ctx, calls, now, until)
	} else {
		pipe := b.rdb.Pipeline()
		for _, c := range calls {
			c.sent = lua.QueueGrab(ctx, pipe, c.keys, now, c.reqs)
		}
		// Errors are in each call's command.
		_, _ = pipe.Exec(ctx)
		for _, c := range calls {
			c.replies, c.err = c.sent.Replies(ctx, b.rdb)
		}
	}
	for _, c := range calls {
		for i, g := range c.grabs {
			g.res, g.err = c.reply(i)
			close(g.done)
		}
	}
}
