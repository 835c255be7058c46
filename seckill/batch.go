package seckill

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgekit/surge/internal/autopipe"
	"github.com/surgekit/surge/lua"
)

// Concurrent grabs share admission-script calls: whatever grabs are waiting when a batcher
// worker becomes free go out together, one script call per voucher (up to perCall users) and
// all calls in one pipeline. A grab that arrives while a worker is idle goes out at once, so
// nothing waits at low load; under load a script run admits many users and Redis pays its
// per-call costs (the read and write of the request, the script's setup, the voucher's meta
// and stock) once per batch instead of once per grab.
const (
	perFlush = 1024 // grabs one worker sends at once
	perCall  = 128  // grabs in one script call: bounds how long one run blocks Redis
)

// grabCall is one grab waiting in a batch.
type grabCall struct {
	voucher int
	user    int
	order   int64
	res     lua.GrabReply
	err     error
	done    chan struct{}
}

type batcher struct {
	s       *Service
	reqs    chan *grabCall
	quit    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	timeout time.Duration
	calls   atomic.Int64 // script calls sent (for tests)
}

func newBatcher(s *Service, workers int) *batcher {
	b := &batcher{s: s, reqs: make(chan *grabCall), quit: make(chan struct{}), timeout: 10 * time.Second}
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

// admit runs the admission script for one grab and returns its reply. With
// Options.Pipelines < 0 every grab is its own call; otherwise it joins a batch. If ctx ends
// while the batch is in flight the grab may still have been admitted: the caller is told
// ctx's error, and a retry with the same order id is answered "admitted" (the script is
// idempotent per order id).
func (s *Service) admit(ctx context.Context, voucherID, userID int, orderID int64) (lua.GrabReply, error) {
	if s.batch == nil {
		r, err := lua.Grab(ctx, s.rdb, s.scriptKeys(voucherID), s.opts.Clock(), []lua.GrabRequest{{User: userID, Order: orderID}})
		if err != nil {
			return lua.GrabReply{}, err
		}
		return r[0], nil
	}
	if err := ctx.Err(); err != nil {
		return lua.GrabReply{}, err
	}
	c := &grabCall{voucher: voucherID, user: userID, order: orderID, done: make(chan struct{})}
	select {
	case s.batch.reqs <- c:
	case <-ctx.Done():
		return lua.GrabReply{}, ctx.Err()
	case <-s.batch.quit:
		return lua.GrabReply{}, ErrClosed
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return lua.GrabReply{}, ctx.Err()
	}
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
	keys  lua.SeckillKeys
	reqs  []lua.GrabRequest
	grabs []*grabCall
	sent  *lua.QueuedGrab
}

func (b *batcher) flush(batch []*grabCall) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	now := b.s.opts.Clock()

	// One call per voucher (per perCall grabs), in arrival order within a voucher.
	var calls []*scriptCall
	open := map[int]*scriptCall{}
	for _, g := range batch {
		c := open[g.voucher]
		if c == nil || len(c.grabs) == perCall {
			c = &scriptCall{keys: b.s.scriptKeys(g.voucher)}
			open[g.voucher] = c
			calls = append(calls, c)
		}
		c.reqs = append(c.reqs, lua.GrabRequest{User: g.user, Order: g.order})
		c.grabs = append(c.grabs, g)
	}

	pipe := b.s.rdb.Pipeline()
	for _, c := range calls {
		c.sent = lua.QueueGrab(ctx, pipe, c.keys, now, c.reqs)
	}
	b.calls.Add(int64(len(calls)))
	// Errors are in each call's command.
	_, _ = pipe.Exec(ctx)
	for _, c := range calls {
		replies, err := c.sent.Replies(ctx, b.s.rdb)
		for i, g := range c.grabs {
			if err != nil {
				g.err = err
			} else {
				g.res = replies[i]
			}
			close(g.done)
		}
	}
}
