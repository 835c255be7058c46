package idgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewSegment returns a generator in segment mode (Meituan Leaf's double buffer): it reserves a
// block of sequence numbers with one INCRBY on the same day key plain mode uses, and hands them
// out locally with an atomic add. When a tenth of the current block is used, the next block is
// fetched in the background, so Next waits for Redis only when both blocks are used up (the
// first call, a burst outrunning the fetch, or the first id of a new UTC day).
//
// The block size adapts to the rate, as Leaf's does with its 15-minute segment duration, scaled
// to a Redis round trip: a fetch that comes less than the block duration (WithBlockDuration,
// 15 s) after the previous one doubles the step, one that comes two or more block durations
// later halves it, within WithStep's bounds (1,000 to 2^22). 15 s keeps fetches rare even at
// millions of ids a second while a restart abandons at most about 30 s of the process's ids
// (the rest of its block and the prefetched one) out of the day's 2^32.
//
// Ids have the same layout as plain mode's: the seconds are read when the id is handed out, and
// always fall in the day of the block (a block of a day that has ended is discarded). Blocks
// never overlap across processes or restarts, since each comes from the shared counter.
//
// No goroutine runs until the first Next; Close stops the background fetch.
func NewSegment(rdb redis.UniversalClient, prefix string, opts ...Option) (*Generator, error) {
	g, err := New(rdb, prefix, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.seg = &segment{g: g, step: g.cfg.minStep, ctx: ctx, cancel: cancel}
	return g, nil
}

// segment is the double buffer. The fast path reads cur and adds to its counter, without a
// lock; mu guards the rest.
type segment struct {
	g   *Generator
	cur atomic.Pointer[block]

	mu       sync.Mutex
	spare    *block    // the prefetched block, if any
	loading  *load     // the fetch in flight, if any (at most one)
	step     int64     // size of the next fetch
	lastLoad time.Time // when the previous fetch started (monotonic clock, for the step rule)

	ctx    context.Context // cancelled by Close: ends a fetch in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// block is a reserved range [first, hi) of one day's sequence. Its ids carry seconds in
// [since, until): until is maxBlockAge after the clock's reading when the reservation was sent
// (or since + 1 s, if the counter's fence lies beyond that), so a fence set after a Redis loss
// outlasts every id of every block reserved before it. It is not used once it is maxBlockAge
// old by the monotonic clock either.
type block struct {
	n      atomic.Uint64 // the next number to hand out; may run past hi
	hi     uint64
	refill uint64 // whoever takes this number starts the prefetch (a tenth of the block in)
	day    *day
	since  int64
	until  int64
	born   time.Time
}

// usable says whether b may stamp an id at second sec, read at now.
func (b *block) usable(now time.Time, sec int64, maxAge time.Duration) bool {
	return sec < b.day.end && sec < b.until && now.Sub(b.born) < maxAge
}

// load is one fetch; done is closed when it ends.
type load struct {
	day  *day
	done chan struct{}
	err  error
}

func (s *segment) next(ctx context.Context) (int64, error) {
	maxAge := s.g.cfg.maxBlockAge()
	for {
		now, sec, err := s.g.second()
		if err != nil {
			return 0, err
		}
		b := s.cur.Load()
		if b != nil && sec < b.since {
			// The fetch raised the generator's second to the block's since after our clock
			// read: reading again catches up.
			sec = s.g.raise(b.since)
		}
		if b != nil && b.usable(now, sec, maxAge) {
			if sec < b.day.start {
				// Another goroutine moved on to a later day after our clock read; it raised the
				// generator's high-water second first, so reading again catches up.
				continue
			}
			n := b.n.Add(1) - 1
			if n < b.hi {
				if n == b.refill {
					s.prefetch(b)
				}
				return sec<<seqBits | int64(n), nil
			}
		}
		if err := s.advance(ctx, b, now, sec); err != nil {
			return 0, err
		}
	}
}

// advance replaces old, the current block, which is used up, too old or of a day before sec's:
// with the prefetched block if it is of sec's day (or later) and young enough, else with a
// block fetched now. It returns nil once the current block has changed, or a fetch ended
// without a block (fenced past its day), for the caller to try again.
func (s *segment) advance(ctx context.Context, old *block, now time.Time, sec int64) error {
	d := s.g.dayOf(sec)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.g.closed.Load() {
			return ErrClosed
		}
		if s.cur.Load() != old {
			return nil
		}
		if nb := s.spare; nb != nil {
			s.spare = nil
			if nb.day.num >= d.num && nb.usable(now, max(sec, nb.since), s.g.cfg.maxBlockAge()) {
				s.cur.Store(nb)
				return nil
			}
			// A block of a day that has ended, or too old: its numbers are abandoned.
		}
		if s.g.spent.Load() == d.num {
			return fmt.Errorf("%w: %s", ErrSequenceExhausted, d.key)
		}
		l := s.loading
		if l == nil {
			l = s.startLoad(d)
		}
		s.mu.Unlock()
		select {
		case <-l.done:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			return ctx.Err()
		}
		// A failed fetch for an older day (a prefetch across midnight) says nothing about
		// ours: go round and fetch our day.
		if l.err != nil && l.day.num >= d.num && !s.g.closed.Load() {
			return l.err
		}
		if l.err == nil && s.spare == nil {
			return nil // fenced past its day (the generator's second moved on): read again
		}
	}
}

// prefetch starts fetching the block after b, if b is still current and nothing is fetched or
// waiting already.
func (s *segment) prefetch(b *block) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.g.closed.Load() && s.cur.Load() == b && s.spare == nil && s.loading == nil && s.g.spent.Load() != b.day.num {
		s.startLoad(b.day)
	}
}

// startLoad adapts the step and fetches a block of day d in the background. s.mu is held.
func (s *segment) startLoad(d *day) *load {
	now := time.Now()
	if !s.lastLoad.IsZero() {
		switch since := now.Sub(s.lastLoad); {
		case since < s.g.cfg.target:
			s.step = min(s.step*2, s.g.cfg.maxStep)
		case since >= 2*s.g.cfg.target:
			s.step = max(s.step/2, s.g.cfg.minStep)
		}
	}
	s.lastLoad = now
	l := &load{day: d, done: make(chan struct{})}
	s.loading = l
	s.wg.Add(1)
	go s.fetch(l, s.step)
	return l
}

// fetchTimeout bounds one block reservation, so a Redis that hangs fails the waiting callers
// and the next fetch starts afresh once it answers.
const fetchTimeout = 5 * time.Second

func (s *segment) fetch(l *load, step int64) {
	defer s.wg.Done()
	born, _, _ := s.g.second()
	bornWall := s.g.wall.Load()
	ctx, cancel := context.WithTimeout(s.ctx, fetchTimeout)
	r, err := s.g.reserve(ctx, l.day, step, 0)
	cancel()
	s.mu.Lock()
	if err == nil && !s.g.closed.Load() {
		s.g.raise(r.since)
		if r.since < l.day.end {
			first := r.last - step + 1
			hi := min(r.last, MaxSequence) + 1 // the last block of a day may be cut at MaxSequence
			until := max(bornWall+int64(s.g.cfg.maxBlockAge()/time.Second), r.since+1)
			b := &block{hi: uint64(hi), refill: uint64(first + (hi-first)/10), day: l.day, since: r.since, until: until, born: born}
			b.n.Store(uint64(first))
			s.spare = b
		}
	}
	l.err = err
	s.loading = nil
	s.mu.Unlock()
	close(l.done)
}

func (s *segment) close() {
	s.mu.Lock()
	s.cur.Store(nil)
	s.spare = nil
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}
