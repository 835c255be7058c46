package cache

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/surgekit/surge/lua"
)

// refresh rebuilds a logically expired value in the background: it takes the lease (the
// stale value is present, so not "if missing") and loads and writes back. The lease is taken
// only if the value still carries the expire-at the reader saw: if another process rebuilt it
// meanwhile, or holds the lease and is rebuilding it, this one does nothing.
func (c *Cache[V]) refresh(id string, staleAt time.Time, load Loader[V]) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.LoadTimeout)
	defer cancel()
	token := rand.Text()
	seen := binary.BigEndian.AppendUint64(nil, uint64(staleAt.UnixMilli()))
	res, err := c.lease(ctx, id, lua.CacheLeaseIfStale(c.Key(id), c.leaseKey(id), token, c.opts.LeaseTTL, seen), token)
	if err != nil || res.Outcome != lua.LeaseTaken {
		return
	}
	_, _ = c.loadWithLease(ctx, id, load, token)
}

// rebuildPool runs background rebuilds on a fixed number of workers with a bounded queue.
// An id already queued or running is not queued twice; when the queue is full the rebuild
// is dropped (and counted): the stale value stays served and a later read retries.
type rebuildPool struct {
	tasks   chan func()
	mu      sync.Mutex
	pending map[string]bool
	stats   *stats
	wg      sync.WaitGroup
	once    sync.Once
	closed  chan struct{}
}

func newRebuildPool(workers, queue int, s *stats) *rebuildPool {
	p := &rebuildPool{tasks: make(chan func(), queue), pending: map[string]bool{}, stats: s, closed: make(chan struct{})}
	for i := 0; i < workers; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for task := range p.tasks {
				task()
				p.stats.rebuildQueue.Set(float64(len(p.tasks)))
			}
		}()
	}
	return p
}

// submit queues a rebuild of id; it reports whether it was queued.
func (p *rebuildPool) submit(id string, rebuild func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		return false
	default:
	}
	if p.pending[id] {
		return false
	}
	task := func() {
		defer func() {
			p.mu.Lock()
			delete(p.pending, id)
			p.mu.Unlock()
		}()
		// A loader's panic is already an error of the load (and releases its lease); this
		// catches anything else, so that one bad rebuild cannot take the worker or the
		// process down.
		_, _ = guard(func() (struct{}, error) { rebuild(); return struct{}{}, nil })
	}
	select {
	case p.tasks <- task:
		p.pending[id] = true
		p.stats.rebuildQueue.Set(float64(len(p.tasks)))
		return true
	default:
		p.stats.rebuildsDropped.Inc()
		return false
	}
}

func (p *rebuildPool) close() {
	p.once.Do(func() {
		p.mu.Lock()
		close(p.closed)
		close(p.tasks)
		p.mu.Unlock()
		p.wg.Wait()
	})
}
