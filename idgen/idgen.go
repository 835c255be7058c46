package idgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// DefaultRetention is how long a day key is kept after its UTC day ends: a key lives at most
// 48 h. It is also how far behind Redis's clock a generator's clock may lag at midnight before
// Next refuses the old day with ErrDayExpired.
const DefaultRetention = 24 * time.Hour

// Option configures New and NewSegment.
type Option func(*config)

type config struct {
	epoch     int64 // Unix seconds
	clock     func() time.Time
	retention int64 // seconds
	minStep   int64
	maxStep   int64
	target    time.Duration
	err       error
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithEpoch sets the zero of the seconds field (default Epoch, 2022-01-01T00:00:00Z), truncated
// to the second; it may not be before 1970. Every generator of a prefix must use the same epoch,
// or their ids can collide.
func WithEpoch(t time.Time) Option {
	return func(c *config) {
		if t.Unix() < 0 {
			c.fail(fmt.Errorf("idgen: epoch %v is before 1970", t))
		}
		c.epoch = t.Unix()
	}
}

// WithClock replaces the local clock (time.Now). It picks both the seconds of each id and the
// day key that id's sequence comes from, so tests can move a generator across midnight. It
// must be safe for concurrent use.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.fail(errors.New("idgen: WithClock(nil)"))
		}
		c.clock = now
	}
}

// WithRetention sets how long a day key outlives its UTC day (DefaultRetention). It is also the
// tolerance for a clock lagging behind Redis's; every generator of a prefix must use the same
// value. At least a second.
func WithRetention(d time.Duration) Option {
	return func(c *config) {
		if d < time.Second {
			c.fail(fmt.Errorf("idgen: retention %v is under a second", d))
		}
		c.retention = int64(d / time.Second)
	}
}

// WithStep bounds the block size of segment mode (default 1,000 to 4,194,304 = 2^22). Blocks
// start at min and adapt to the rate (see NewSegment); max also bounds the sequence numbers a
// restart can abandon. New ignores it.
func WithStep(min, max int64) Option {
	return func(c *config) {
		if min < 1 || min > max || max > MaxSequence {
			c.fail(fmt.Errorf("idgen: step bounds %d..%d: want 1 <= min <= max <= %d", min, max, int64(MaxSequence)))
		}
		c.minStep, c.maxStep = min, max
	}
}

// WithBlockDuration sets how long a segment-mode block should last (default 15 s): the step
// doubles while blocks last less and halves when one lasts twice as long. New ignores it.
func WithBlockDuration(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("idgen: block duration %v is not positive", d))
		}
		c.target = d
	}
}

// Generator hands out ids for one prefix. New makes one that asks Redis for every id,
// NewSegment one that reserves blocks of sequence numbers and hands them out locally. It is
// safe for concurrent use. Close it when done (needed in segment mode, harmless otherwise).
type Generator struct {
	rdb    redis.UniversalClient
	prefix string
	cfg    config

	high   atomic.Int64        // the latest second (since the epoch) this generator has used
	today  atomic.Pointer[day] // cache of the day of the latest second
	spent  atomic.Int64        // number of a day whose sequence is exhausted (math.MinInt64: none)
	closed atomic.Bool
	seg    *segment // nil in plain mode
}

// day is one UTC day of one prefix: its key, its span in seconds since the epoch and when
// its key expires.
type day struct {
	num        int64 // days since 1970-01-01 UTC
	start, end int64 // [start, end) in seconds since the epoch
	key        string
	expireAt   int64 // Unix seconds
}

// New returns a generator that reserves each id with one Redis round trip (INCR on the day
// key), on rdb: a single node or a Cluster client. Every generator of a prefix, in every
// process, draws from the same per-day sequence, so their ids never collide.
func New(rdb redis.UniversalClient, prefix string, opts ...Option) (*Generator, error) {
	if rdb == nil {
		return nil, errors.New("idgen: nil Redis client")
	}
	if err := validPrefix(prefix); err != nil {
		return nil, err
	}
	cfg := config{
		epoch:     Epoch,
		clock:     time.Now,
		retention: int64(DefaultRetention / time.Second),
		minStep:   1000,
		maxStep:   1 << 22,
		target:    15 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	g := &Generator{rdb: rdb, prefix: prefix, cfg: cfg}
	g.high.Store(-1)
	g.spent.Store(math.MinInt64)
	return g, nil
}

// validPrefix keeps keys readable and Cluster-neutral: braces would turn part of the prefix
// into a hash tag. Distinct prefixes always give distinct keys, since the key ends in a
// fixed-width ":yyyymmdd".
func validPrefix(p string) error {
	if p == "" || strings.ContainsFunc(p, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == '{' || r == '}' || r == unicode.ReplacementChar
	}) {
		return fmt.Errorf("%w: %q", ErrInvalidPrefix, p)
	}
	return nil
}

// Next returns a new id. In plain mode it costs one Redis round trip; in segment mode it is
// served from the local block and waits (at most until ctx is done) only when no reserved
// number is left.
//
// Order: if one call to Next returns before another call on the same Generator starts, the
// second id is larger, whatever the goroutines; concurrent calls are unordered between them.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	if g.seg != nil {
		return g.seg.next(ctx)
	}
	if g.closed.Load() {
		return 0, ErrClosed
	}
	sec, err := g.second()
	if err != nil {
		return 0, err
	}
	last, err := g.reserve(ctx, g.dayOf(sec), 1)
	if err != nil {
		return 0, err
	}
	return sec<<seqBits | last, nil
}

// Decompose splits an id of this generator (its epoch) into its second (UTC) and sequence
// number.
func (g *Generator) Decompose(id int64) (t time.Time, seq uint32) {
	return decompose(g.cfg.epoch, id)
}

// Close stops a segment generator's background fetch and waits for it; the rest of its block is
// abandoned (those numbers are never issued by anyone). Next returns ErrClosed afterwards.
func (g *Generator) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	if g.seg != nil {
		g.seg.close()
	}
	return nil
}

// second reads the clock as seconds since the epoch, raised to the latest second this
// generator has already used. Clamping gives the per-generator order even when the clock
// steps back: ids then keep the last second (and its day) until the clock catches up. Every
// id's day is derived from this one value, so its seconds always fall inside the day whose
// key its sequence number came from.
func (g *Generator) second() (int64, error) {
	s := g.cfg.clock().Unix() - g.cfg.epoch
	if s < 0 {
		return 0, ErrClockBeforeEpoch
	}
	for {
		h := g.high.Load()
		if s <= h {
			s = h
			break
		}
		if g.high.CompareAndSwap(h, s) {
			break
		}
	}
	if s > MaxSeconds {
		return 0, ErrTimeOverflow
	}
	return s, nil
}

// dayOf returns the UTC day of second sec (since the epoch).
func (g *Generator) dayOf(sec int64) *day {
	if d := g.today.Load(); d != nil && sec >= d.start && sec < d.end {
		return d
	}
	num := (sec + g.cfg.epoch) / daySecs
	start := num*daySecs - g.cfg.epoch
	d := &day{
		num:      num,
		start:    start,
		end:      start + daySecs,
		key:      "id:" + g.prefix + ":" + time.Unix(num*daySecs, 0).UTC().Format("20060102"),
		expireAt: (num+1)*daySecs + g.cfg.retention,
	}
	g.today.Store(d)
	return d
}

// reserve takes the next n numbers of d's sequence and returns the last one; the caller owns
// [last-n+1, min(last, MaxSequence)].
func (g *Generator) reserve(ctx context.Context, d *day, n int64) (int64, error) {
	if g.spent.Load() == d.num {
		return 0, fmt.Errorf("%w: %s", ErrSequenceExhausted, d.key)
	}
	last, err := lua.IDGenNext.Run(ctx, g.rdb, []string{d.key}, n, d.expireAt).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("idgen: reserving from %s: %w", d.key, err)
	case last == -1:
		return 0, fmt.Errorf("%w: %s expired at %s by Redis's clock", ErrDayExpired, d.key, time.Unix(d.expireAt, 0).UTC().Format(time.RFC3339))
	case last < n:
		return 0, fmt.Errorf("idgen: %s holds %d, below the %d just added: the key was overwritten", d.key, last-n, n)
	case last-n+1 > MaxSequence:
		// The counter only grows, so the day stays exhausted: answer locally from now on.
		g.spent.Store(d.num)
		return 0, fmt.Errorf("%w: %s", ErrSequenceExhausted, d.key)
	}
	return last, nil
}
