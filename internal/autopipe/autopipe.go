// Package autopipe sends the Redis commands of concurrent callers together: whatever calls
// are waiting when a worker becomes free go out in one pipeline, one round trip. A call that
// arrives while a worker is idle is sent at once, so nothing waits at low load; under load
// the pipelines grow with the queue, and Redis answers many commands per read and write
// instead of one (what makes redis-benchmark -P 16 several times faster than -P 1).
//
// A call that finds no other call in flight (no pipeline, no call on its own) goes out from
// the caller's goroutine (the inline slot), without a hand-off to a worker and back: each
// hand-off is a wait in the scheduler's run queue when the CPUs are busy, which is where a
// request's tail grows. Calls that arrive meanwhile go to the workers, and are batched.
package autopipe

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("autopipe: closed")

// Pipeliner sends batches of calls on one Redis client.
type Pipeliner struct {
	rdb     redis.UniversalClient
	max     int
	timeout time.Duration
	reqs    chan *call
	quit    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	inline  Inline
	flushes atomic.Int64 // pipelines sent (for tests)
}

type call struct {
	add  func(p redis.Pipeliner)
	done chan struct{}
}

// New starts workers (each with at most one pipeline in flight) on rdb; a pipeline holds at
// most max calls. Close stops them.
func New(rdb redis.UniversalClient, workers, max int) *Pipeliner {
	if workers < 1 {
		workers = 1
	}
	if max < 1 {
		max = 1
	}
	p := &Pipeliner{rdb: rdb, max: max, timeout: 10 * time.Second, reqs: make(chan *call), quit: make(chan struct{})}
	for i := 0; i < workers; i++ {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

// Do has add queue its commands on a pipeline shared with concurrent callers and returns once
// that pipeline has run; the commands' results are then in the Cmds add created. Batched
// commands run with a context of their own (bounded by a timeout), not ctx: if ctx ends
// first, Do returns ctx's error but commands already sent still take effect. A call sent from
// the caller's goroutine (nothing else was in flight) is bounded by ctx as well, and returns at
// its end whether the client honours deadlines or not (redisctx); its commands may then have
// taken effect or not.
func (p *Pipeliner) Do(ctx context.Context, add func(p redis.Pipeliner)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.inline.Take() {
		defer p.inline.Release()
		return p.doNow(ctx, add)
	}
	c := &call{add: add, done: make(chan struct{})}
	select {
	case p.reqs <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.quit:
		return ErrClosed
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// doNow sends add's commands from the caller's goroutine, alone in a pipeline.
func (p *Pipeliner) doNow(ctx context.Context, add func(p redis.Pipeliner)) error {
	select {
	case <-p.quit:
		return ErrClosed
	default:
	}
	callCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	p.flushes.Add(1)
	err := redisctx.Err(callCtx, p.rdb, func(callCtx context.Context) error {
		pipe := p.rdb.Pipeline()
		add(pipe)
		// Errors are in the commands.
		_, _ = pipe.Exec(callCtx)
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (p *Pipeliner) work() {
	defer p.wg.Done()
	batch := make([]*call, 0, p.max)
	for {
		var ok bool
		if batch, ok = Gather(p.reqs, p.quit, batch); !ok {
			return
		}
		p.flush(batch)
	}
}

// Gather is this package's batching rule, for workers of other batchers too: it waits for one
// request on reqs, then takes the requests already waiting, up to cap(buf), into buf (reused
// from its start). ok is false once quit is closed.
func Gather[T any](reqs <-chan T, quit <-chan struct{}, buf []T) (batch []T, ok bool) {
	select {
	case r := <-reqs:
		batch = append(buf[:0], r)
	case <-quit:
		return buf[:0], false
	}
	for len(batch) < cap(buf) {
		select {
		case r := <-reqs:
			batch = append(batch, r)
		default:
			return batch, true
		}
	}
	return batch, true
}

// Inline is this package's rule for sending a call from its caller's goroutine, for other
// batchers too: Take succeeds only while no batch is being sent (Flushing to Flushed) and no other call
// holds the slot; the caller then sends its call alone and calls Release.
type Inline struct {
	taken atomic.Bool
	busy  atomic.Int32 // batches being sent
	count atomic.Int64 // calls sent inline (for tests)
}

// Take reports whether the caller may send its call now, from its own goroutine.
func (in *Inline) Take() bool {
	if in.busy.Load() == 0 && in.taken.CompareAndSwap(false, true) {
		in.count.Add(1)
		return true
	}
	return false
}

// Release frees the slot Take gave.
func (in *Inline) Release() { in.taken.Store(false) }

// Flushing marks a batch being sent, until Flushed.
func (in *Inline) Flushing() { in.busy.Add(1) }

// Flushed ends what Flushing began.
func (in *Inline) Flushed() { in.busy.Add(-1) }

// Count is how many calls Take let go out inline.
func (in *Inline) Count() int64 { return in.count.Load() }

func (p *Pipeliner) flush(batch []*call) {
	p.inline.Flushing()
	defer p.inline.Flushed()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	p.flushes.Add(1)
	pipe := p.rdb.Pipeline()
	for _, c := range batch {
		c.add(pipe)
	}
	// Errors are in each call's commands.
	_, _ = pipe.Exec(ctx)
	for _, c := range batch {
		close(c.done)
	}
}

// Close stops the workers after the pipelines in flight; later calls get ErrClosed.
func (p *Pipeliner) Close() {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
}
