package idgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
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
	skew      time.Duration
	namespace string // "" or "<ns>:", the start of every key
	epochs    EpochStore
	err       error
}

// maxBlockAge is how long a segment block is used after it was reserved: twice the block
// duration. Bounding it bounds how late an id from a block reserved before a Redis loss can be
// stamped, which is what the fence after a loss must outlast.
func (c *config) maxBlockAge() time.Duration { return 2 * c.target }

// fence is how far ahead of Redis's clock the counter is fenced after a possible loss: no id
// made before the loss carries a later second (see lua/idgen_next.lua).
// The extra second keeps a second fence strictly after the first when two losses come
// within a second: blocks reserved between them are used up to their since + 1 s at most.
func (c *config) fence() int64 {
	return int64((c.maxBlockAge()+c.skew+time.Second-1)/time.Second) + 1
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

// WithBlockDuration sets how long a segment-mode block should last (default 5 s): the step
// doubles while blocks last less and halves when one lasts twice as long; a block is not used
// past twice this duration. It also sets the fence after a Redis loss (see the package doc),
// so every generator of a prefix, in either mode, must use the same value.
func WithBlockDuration(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("idgen: block duration %v is not positive", d))
		}
		c.target = d
	}
}

// WithMaxClockSkew sets how far apart the clocks of the generators of a prefix and Redis's may
// be (default 2 s). It is part of the fence after a Redis loss (see the package doc); every
// generator of a prefix must use the same value.
func WithMaxClockSkew(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail(fmt.Errorf("idgen: clock skew %v is negative", d))
		}
		c.skew = d
	}
}

// WithNamespace puts every key of the generator under ns: <ns>:id:<prefix>:<yyyymmdd>, so that
// deployments sharing one Redis keep their own counters. Without it (or with "") the keys are
// id:<prefix>:<yyyymmdd>. ns follows the prefix's rules and may not start or end with a colon.
func WithNamespace(ns string) Option {
	return func(c *config) {
		if ns == "" {
			c.namespace = ""
			return
		}
		if err := validPrefix(ns); err != nil || strings.HasPrefix(ns, ":") || strings.HasSuffix(ns, ":") {
			c.fail(fmt.Errorf("%w: namespace %q", ErrInvalidPrefix, ns))
			return
		}
		c.namespace = ns + ":"
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
	wall   atomic.Int64        // the latest second its clock has read (high without the fences)
	today  atomic.Pointer[day] // cache of the day of the latest second
	spent  atomic.Int64        // number of a day whose sequence is exhausted (math.MinInt64: none)
	closed atomic.Bool
	seg    *segment // nil in plain mode

	fenced atomic.Int64 // reservations that found a possible loss of the counter

	hwMu sync.Mutex
	hw   map[int64]int64 // day number -> the highest number this generator has reserved
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
		target:    5 * time.Second,
		skew:      2 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	g := &Generator{rdb: rdb, prefix: prefix, cfg: cfg, hw: map[int64]int64{}}
	g.high.Store(-1)
	g.wall.Store(-1)
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
	for {
		if g.closed.Load() {
			return 0, ErrClosed
		}
		_, sec, err := g.second()
		if err != nil {
			return 0, err
		}
		d := g.dayOf(sec)
		r, err := g.reserve(ctx, d, 1, 0)
		if err != nil {
			return 0, err
		}
		if sec < r.since {
			sec = g.raise(r.since)
		}
		if sec >= d.end {
			continue // fenced past the day's end: the number stays unused, try the next day
		}
		if sec > MaxSeconds {
			return 0, ErrTimeOverflow
		}
		return sec<<seqBits | r.last, nil
	}
}

// Raise tells the generator that id, an id of its prefix, was issued (found in a database,
// say): if the shared counter of id's day is below id's number, Redis has lost counts, and
// the counter is raised above it and fenced, so that no id issued after Raise returns, by any
// generator of the prefix, equals id or an earlier id of its day. Without a loss it changes
// nothing. An id of a day whose key has expired needs nothing (that day is never counted
// again).
func (g *Generator) Raise(ctx context.Context, id int64) error {
	if id <= 0 {
		return fmt.Errorf("idgen: Raise(%d): not an id", id)
	}
	if g.closed.Load() {
		return ErrClosed
	}
	sec, seq := id>>seqBits, id&MaxSequence
	d := g.newDay(sec)
	r, err := g.reserve(ctx, d, 0, seq)
	if errors.Is(err, ErrDayExpired) {
		return nil
	}
	if err != nil {
		return err
	}
	g.raise(r.since)
	return nil
}

// Fence checks the counter of the clock's current day, reserving nothing: if it may have lost
// counts (no key, another Redis process), it is fenced now (through the epoch store, if any),
// rather than at the first reservation after the loss, which a segment generator still using
// a block reserved before it may make only seconds later. Call it after a known loss (a
// rebuild of state Redis lost), so that LatestFence tells the ids issued before it at once.
func (g *Generator) Fence(ctx context.Context) error {
	if g.closed.Load() {
		return ErrClosed
	}
	_, sec, err := g.second()
	if err != nil {
		return err
	}
	r, err := g.reserve(ctx, g.dayOf(sec), 0, 0)
	if err != nil {
		return err
	}
	g.raise(r.since)
	return nil
}

// Fenced reports how many of this generator's reservations found a possible loss of the
// counter (no key, another Redis process, a counter below a known number) and fenced it.
func (g *Generator) Fenced() int64 { return g.fenced.Load() }

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
// generator has already used, and returns the reading too (for the age of segment blocks).
// Clamping gives the per-generator order even when the clock steps back: ids then keep the
// last second (and its day) until the clock catches up. Every id's day is derived from this
// one value, so its seconds always fall inside the day whose key its sequence number came
// from.
func (g *Generator) second() (time.Time, int64, error) {
	now := g.cfg.clock()
	s := now.Unix() - g.cfg.epoch
	if s < 0 {
		return now, 0, ErrClockBeforeEpoch
	}
	atomicMax(&g.wall, s)
	s = atomicMax(&g.high, s)
	if s > MaxSeconds {
		return now, 0, ErrTimeOverflow
	}
	return now, s, nil
}

// raise lifts the generator's latest second to at least sec (a counter's `since`), so that
// every id it stamps from now on carries sec or later, and returns sec.
func (g *Generator) raise(sec int64) int64 {
	atomicMax(&g.high, sec)
	return sec
}

// atomicMax raises v to at least x and returns the result.
func atomicMax(v *atomic.Int64, x int64) int64 {
	for {
		h := v.Load()
		if x <= h {
			return h
		}
		if v.CompareAndSwap(h, x) {
			return x
		}
	}
}

// dayOf returns the UTC day of second sec (since the epoch), cached for the next call.
func (g *Generator) dayOf(sec int64) *day {
	if d := g.today.Load(); d != nil && sec >= d.start && sec < d.end {
		return d
	}
	d := g.newDay(sec)
	g.today.Store(d)
	return d
}

func (g *Generator) newDay(sec int64) *day {
	num := (sec + g.cfg.epoch) / daySecs
	start := num*daySecs - g.cfg.epoch
	return &day{
		num:      num,
		start:    start,
		end:      start + daySecs,
		key:      g.cfg.namespace + "id:" + g.prefix + ":" + time.Unix(num*daySecs, 0).UTC().Format("20060102"),
		expireAt: (num+1)*daySecs + g.cfg.retention,
	}
}

// reservation is a range of one day's numbers, ending at last, and the first second (since
// the epoch) the ids made with them may carry.
type reservation struct {
	last, since int64
}

// reserve takes the next n numbers of d's sequence; the caller owns [last-n+1,
// min(last, MaxSequence)] and stamps them no earlier than since. The counter is raised to
// floor first, and to the highest number this generator has reserved on d: a counter below
// either went backwards.
func (g *Generator) reserve(ctx context.Context, d *day, n, floor int64) (reservation, error) {
	if g.spent.Load() == d.num {
		return reservation{}, fmt.Errorf("%w: %s", ErrSequenceExhausted, d.key)
	}
	floor = max(floor, g.highWater(d.num))
	mode := lua.FenceInPlace
	if g.cfg.epochs != nil {
		mode = lua.FenceAsk
	}
	var r lua.IDReservation
	for {
		var err error
		asked := time.Now()
		r, err = redisctx.Do(ctx, g.rdb, func(ctx context.Context) (lua.IDReservation, error) {
			return lua.ReserveIDs(ctx, g.rdb, d.key, n, d.expireAt, floor, g.cfg.fence(), mode)
		})
		if err == nil && r.NeedsFence {
			r, err = g.fenceDurably(ctx, d, n, floor, r, asked)
			if errors.Is(err, errFenceRetry) {
				if err = pauseBeforeAsking(ctx); err == nil {
					continue
				}
			}
		}
		switch {
		case err != nil:
			return reservation{}, fmt.Errorf("idgen: reserving from %s: %w", d.key, err)
		case r.Expired:
			return reservation{}, fmt.Errorf("%w: %s expired at %s by Redis's clock", ErrDayExpired, d.key, time.Unix(d.expireAt, 0).UTC().Format(time.RFC3339))
		}
		break
	}
	if r.Fenced {
		g.fenced.Add(1)
	}
	g.noteHighWater(d.num, r.Last)
	if r.Last-n+1 > MaxSequence {
		// The counter only grows, so the day stays exhausted: answer locally from now on.
		g.spent.Store(d.num)
		return reservation{}, fmt.Errorf("%w: %s", ErrSequenceExhausted, d.key)
	}
	return reservation{last: r.Last, since: r.Since - g.cfg.epoch}, nil
}

// highWater is the highest number this generator has reserved on day num (0: none).
func (g *Generator) highWater(num int64) int64 {
	g.hwMu.Lock()
	defer g.hwMu.Unlock()
	return g.hw[num]
}

func (g *Generator) noteHighWater(num, last int64) {
	g.hwMu.Lock()
	defer g.hwMu.Unlock()
	if last <= g.hw[num] {
		return
	}
	g.hw[num] = last
	for d := range g.hw {
		if d < num-2 { // days long over: their keys are gone or never counted again
			delete(g.hw, d)
		}
	}
}
