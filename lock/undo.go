package lock

import (
	"context"
	"sync"
	"time"

	"github.com/surgekit/surge/redisctx"
)

// Acquisitions whose outcome the caller never learns.
//
// An acquire script can take a lock although its caller got an error: the reply was lost, or
// the caller's deadline passed while Redis hung (redisctx abandons the call, and Redis runs it
// once it resumes). Such an acquisition is cancelled: released if it took the lock, refused by
// a tombstone if it has not run yet (a command stuck in a hung Redis's input buffer may run
// after the cancel that was sent later). Cancels run in the background, never in the
// caller's way, each bounded by cleanupTimeout; Close waits for those under way.

// cleanupTimeout bounds each background cancel; a cancel that Redis does not answer in time
// leaves the lock to expire at the end of its lease.
const cleanupTimeout = time.Second

// cleanups runs the background cancels of a Client.
type cleanups struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// run runs undo in a goroutine that close waits for (after close, in the calling goroutine),
// under a context bounded by cleanupTimeout.
func (b *cleanups) run(undo func(ctx context.Context)) {
	bounded := func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		undo(ctx)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		bounded()
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		bounded()
	}()
}

// close waits for the cancels under way.
func (b *cleanups) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

// acquire runs an acquire script (obtain) through redisctx, so that it returns at ctx's
// deadline, and cancels the acquisition (cancel) in the background whenever the caller does
// not learn that it took the lock: on an error, and when the abandoned call ends later.
func (c *Client) acquire(ctx context.Context, obtain func(context.Context) (grant, error), cancel func(context.Context) error) (grant, error) {
	undo := func(ctx context.Context) { _ = redisctx.Err(ctx, c.rdb, cancel) }
	g, err := redisctx.DoThen(ctx, c.rdb, obtain, func(g grant, err error) {
		if err != nil || g.Taken {
			c.bg.run(undo)
		}
	})
	if err != nil {
		c.bg.run(undo)
	}
	return g, err
}

// acquireToken takes the simple lock k with token (see acquire).
func (c *Client) acquireToken(ctx context.Context, k keys, token string, lease time.Duration) (grant, error) {
	return c.acquire(ctx,
		func(ctx context.Context) (grant, error) { return c.obtainToken(ctx, k, token, lease) },
		func(ctx context.Context) error { _, err := releaseToken(ctx, c.rdb, k, token, true); return err })
}

// cancelLater cancels the acquisitions of token on names in the background.
func (c *Client) cancelLater(token string, names ...string) {
	for _, name := range names {
		k := c.keysOf(name)
		c.bg.run(func(ctx context.Context) {
			_ = redisctx.Err(ctx, c.rdb, func(ctx context.Context) error { _, err := releaseToken(ctx, c.rdb, k, token, true); return err })
		})
	}
}
