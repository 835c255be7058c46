package cache

import (
	"context"
	"sync"
	"time"
)

// Backoff of the in-process retries of failed invalidations.
const (
	retryFirst = 20 * time.Millisecond
	retryMax   = time.Second
)

// pendingInvalidations retries, in one background goroutine per cache, the invalidations
// whose delete failed after their write (Redis down or hung), with exponential backoff, until
// each succeeds or the cache closes. What is left at Close stays with its recorded intent
// for RunInvalidator.
type pendingInvalidations struct {
	finish  func(ctx context.Context, job invalidation) error
	timeout time.Duration
	stats   *stats

	mu      sync.Mutex
	jobs    map[string]invalidation // by id: a later write's job replaces an earlier one's
	running bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newPendingInvalidations(finish func(context.Context, invalidation) error, timeout time.Duration, s *stats) *pendingInvalidations {
	return &pendingInvalidations{finish: finish, timeout: timeout, stats: s, jobs: map[string]invalidation{}, stop: make(chan struct{})}
}

func (p *pendingInvalidations) add(job invalidation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.jobs[job.id]; ok {
		job.created = job.created || prev.created
		if job.intent == "" {
			job.intent = prev.intent
		}
	}
	p.jobs[job.id] = job
	p.stats.invalidationsPending.Set(float64(len(p.jobs)))
	if !p.running && !p.closed {
		p.running = true
		p.wg.Add(1)
		go p.run()
	}
}

func (p *pendingInvalidations) run() {
	defer p.wg.Done()
	wait := retryFirst
	for {
		t := time.NewTimer(wait)
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if p.retryAll() {
			return
		}
		wait = min(2*wait, retryMax)
	}
}

// retryAll retries every pending job once; it reports whether none is left (and then stops).
func (p *pendingInvalidations) retryAll() bool {
	p.mu.Lock()
	jobs := make([]invalidation, 0, len(p.jobs))
	for _, j := range p.jobs {
		jobs = append(jobs, j)
	}
	p.mu.Unlock()
	for _, job := range jobs {
		p.stats.invalidationRetries.Inc()
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		err := p.finish(ctx, job)
		cancel()
		if err != nil { // still pending: counted, retried after the next back-off
			p.stats.invalidationRetryErrors.Inc()
			continue
		}
		p.mu.Lock()
		if cur, ok := p.jobs[job.id]; ok && cur == job {
			delete(p.jobs, job.id)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.invalidationsPending.Set(float64(len(p.jobs)))
	if len(p.jobs) == 0 {
		p.running = false
		return true
	}
	return false
}

// close stops the retries and waits for the goroutine.
func (p *pendingInvalidations) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
