package seckill

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// background is the work a Service runs beyond its callers' calls: rebuilds a grab started,
// and the runs concurrent callers share. Close ends its context and waits for it.
type background struct {
	shares  singleflight.Group
	mu      sync.RWMutex // closed, and the start of work, against Close
	closed  bool
	wg      sync.WaitGroup
	life    context.Context
	endLife context.CancelFunc
}

func newBackground() *background {
	b := &background{}
	b.life, b.endLife = context.WithCancel(context.Background())
	return b
}

// close ends background work and waits for it.
func (b *background) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.endLife()
	b.wg.Wait()
}

func (b *background) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.closed
}

// testHookBackgroundStart, set by tests only, runs between a background warm's closed check and
// its start.
var testHookBackgroundStart func()

// goBackground runs work in a goroutine that close waits for, with a context that close ends;
// after close it runs nothing. The closed check and the registration with close's wait happen
// under one lock, so that close cannot slip between them and return before the work started.
func (b *background) goBackground(work func(life context.Context)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return
	}
	if testHookBackgroundStart != nil {
		testHookBackgroundStart()
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		work(b.life)
	}()
}

// shared runs work once for all the concurrent callers of key. It runs on a context of its own
// (the service's, bounded by timeout, ended by close), not on the first caller's, so that one
// caller giving up does not fail the others; each caller waits only until its own ctx ends.
func (b *background) shared(ctx context.Context, key string, timeout time.Duration, work func(ctx context.Context) (any, error)) (any, error) {
	run := b.shares.DoChan(key, func() (v any, err error) {
		defer func() {
			// DoChan re-panics in a goroutine of its own, where nothing could recover it.
			if p := recover(); p != nil {
				err = fmt.Errorf("seckill: %s: panic: %v", key, p)
			}
		}()
		ctx, cancel := context.WithTimeout(b.life, timeout)
		defer cancel()
		return work(ctx)
	})
	select {
	case r := <-run:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
