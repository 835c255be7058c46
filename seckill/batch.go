package seckill

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends concurrent calls of one script to Redis in pipelines: whatever calls are
// waiting when a worker becomes free go out together in one round trip. A call that arrives
// when a worker is idle is sent at once, so batching adds no latency at low load; under load
// the batches grow with the queue and throughput is no longer one round trip per call.
type batcher struct {
	rdb    redis.UniversalClient
	script *redis.Script
	max    int
	reqs   chan *call
	quit   chan struct{}
	wg     sync.WaitGroup
}

type call struct {
	keys []string
	args []any
	done chan struct{}
	vals []any
	err  error
}

func newBatcher(rdb redis.UniversalClient, script *redis.Script, workers, max int) *batcher {
	b := &batcher{rdb: rdb, script: script, max: max, reqs: make(chan *call), quit: make(chan struct{})}
	for i := 0; i < workers; i++ {
		b.wg.Add(1)
		go b.work()
	}
	return b
}

// do runs the script once, batched with concurrent calls. If ctx ends first, do returns
// ctx's error, but a call already sent still takes effect in Redis.
func (b *batcher) do(ctx context.Context, keys []string, args ...any) ([]any, error) {
	c := &call{keys: keys, args: args, done: make(chan struct{})}
	select {
	case b.reqs <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, ErrClosed
	}
	select {
	case <-c.done:
		return c.vals, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *batcher) work() {
	defer b.wg.Done()
	batch := make([]*call, 0, b.max)
	for {
		select {
		case c := <-b.reqs:
			batch = append(batch[:0], c)
		case <-b.quit:
			return
		}
	more:
		for len(batch) < b.max {
			select {
			case c := <-b.reqs:
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.flush(batch)
	}
}

func (b *batcher) flush(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(batch) == 1 {
		c := batch[0]
		c.vals, c.err = b.script.Run(ctx, b.rdb, c.keys, c.args...).Slice()
		close(c.done)
		return
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = b.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range batch {
		c.vals, c.err = cmds[i].Slice()
		if c.err != nil && strings.HasPrefix(c.err.Error(), "NOSCRIPT") {
			// The script is not cached on that node yet (first use, or a restart): Run
			// loads it. The EVALSHA failed before running anything, so this is no retry.
			c.vals, c.err = b.script.Run(ctx, b.rdb, c.keys, c.args...).Slice()
		}
		close(c.done)
	}
}

func (b *batcher) close() {
	close(b.quit)
	b.wg.Wait()
}
