package seckill

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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
	res     []any // {code, value} from the script
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

// admit runs the admission script for one grab and returns the script's {code, value}. With
// Options.Pipelines < 0 every grab is its own call; otherwise it joins a batch. If ctx ends
// while the batch is in flight the grab may still have been admitted: the caller is told
// ctx's error, and a retry with the same order id is answered "admitted" (the script is
// idempotent per order id).
func (s *Service) admit(ctx context.Context, voucherID, userID int, orderID int64) ([]any, error) {
	if s.batch == nil {
		return lua.SeckillGrab.Run(ctx, s.rdb, s.grabKeys(voucherID), s.opts.Clock().UnixMilli(), userID, orderID).Slice()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &grabCall{voucher: voucherID, user: userID, order: orderID, done: make(chan struct{})}
	select {
	case s.batch.reqs <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.batch.quit:
		return nil, ErrClosed
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Service) grabKeys(voucherID int) []string {
	k := s.keys(voucherID)
	return []string{k.Meta, k.Stock, k.Buyers, k.Orders}
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
	keys  []string
	args  []any
	grabs []*grabCall
	cmd   *redis.Cmd
}

func (b *batcher) flush(batch []*grabCall) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	now := b.s.opts.Clock().UnixMilli()

	// One call per voucher (per perCall grabs), in arrival order within a voucher.
	var calls []*scriptCall
	open := map[int]*scriptCall{}
	for _, g := range batch {
		c := open[g.voucher]
		if c == nil || len(c.grabs) == perCall {
			c = &scriptCall{keys: b.s.grabKeys(g.voucher), args: []any{now}}
			open[g.voucher] = c
			calls = append(calls, c)
		}
		c.args = append(c.args, g.user, g.order)
		c.grabs = append(c.grabs, g)
	}

	pipe := b.s.rdb.Pipeline()
	for _, c := range calls {
		c.cmd = lua.SeckillGrab.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	b.calls.Add(int64(len(calls)))
	// Errors are in each call's command.
	_, _ = pipe.Exec(ctx)
	for _, c := range calls {
		res, err := c.cmd.Slice()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// Not cached on that node yet (first use, or a restart): Run loads it. The EVALSHA
			// failed before running anything, so this is no retry of a grab.
			res, err = lua.SeckillGrab.Run(ctx, b.s.rdb, c.keys, c.args...).Slice()
		}
		if err == nil && len(res) != 2*len(c.grabs) {
			err = fmt.Errorf("seckill: admission script answered %d values for %d grabs", len(res), len(c.grabs))
		}
		for i, g := range c.grabs {
			if err != nil {
				g.err = err
			} else {
				g.res = res[2*i : 2*i+2]
			}
			close(g.done)
		}
	}
}
