package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

const (
	// maxRedisBits is the largest bitmap Redis holds (a 512 MiB string).
	maxRedisBits = 1 << 32
	// maxPositionsPerCall bounds one script call's ARGV. Ids per call are
	// min(1000, maxPositionsPerCall/k): 1000 ids for k ≤ 16 (fpRate ≥ about 1e-5).
	maxPositionsPerCall = 16000
	// rebuildLease is how long a Rebuild keeps its lease without writing a batch; every batch
	// renews it. A crashed rebuild blocks the next one at most this long.
	rebuildLease = time.Minute
)

// RedisFilter is a Bloom filter shared by every process through one Redis bitmap.
//
// Keys, all with the hash tag {<name>} so they share one Cluster slot and the multi-key scripts
// (and the RENAME of a rebuild) run on Redis Cluster ("bloom" is FilterPrefix's default):
//
//	bloom:{<name>}                the bitmap, m bits
//	bloom:{<name>}:meta           hash {m, k} it was built with
//	bloom:{<name>}:rebuild        the bitmap a Rebuild is building
//	bloom:{<name>}:rebuild:meta   hash {token, m, k}: the rebuild's lease, it expires
//
// Bit positions are bloom.Locations(id, k) modulo m, computed here, so the scripts only read or
// set bits and a LocalFilter with the same parameters agrees bit for bit. Test, TestMany and Add
// cost one round trip whatever the number of ids: one script call per chunk of up to 1000 ids,
// all chunks in one pipeline. Test runs its script with EVALSHA_RO (Redis 7.0 or later), so
// it is a read for replicas and ACLs.
//
// Only Rebuild creates the filter: Add on a filter that does not exist (never built, or lost by
// a Redis restart or flush) records nothing and returns ErrNotBuilt, and Test answers "maybe
// present" with ErrNotBuilt. A filter recreated by Add would hold only the new ids and turn
// every older row into a miss.
type RedisFilter struct {
	rdb      redis.UniversalClient
	name     string
	expected uint
	fpRate   float64
	m, k     uint
	perCall  int // ids per script call
	keys     lua.BloomKeys
	mArg     string // m and k as the scripts take them
	kArg     string
}

// FilterOption configures NewRedisFilter.
type FilterOption func(*filterConfig)

type filterConfig struct{ prefix string }

// defaultFilterPrefix starts the keys of a filter built without FilterPrefix.
const defaultFilterPrefix = "bloom"

// FilterPrefix replaces "bloom" at the start of the filter's keys: FilterPrefix("ns:bloom")
// keeps the bitmap at ns:bloom:{<name>}, so deployments sharing a Redis keep their own filters.
// It may not be empty or hold braces or spaces (its keys' hash tag is the name).
func FilterPrefix(p string) FilterOption { return func(c *filterConfig) { c.prefix = p } }

// NewRedisFilter returns a client for the filter name, sized for expected ids at false-positive
// rate fpRate (0 < fpRate < 1). It does not touch Redis; every client of one filter must use the
// same expected and fpRate (ErrParamsMismatch otherwise). Call Rebuild once to create the filter.
func NewRedisFilter(rdb redis.UniversalClient, name string, expected uint, fpRate float64, opts ...FilterOption) (*RedisFilter, error) {
	if rdb == nil {
		return nil, errors.New("cache: bloom filter: nil Redis client")
	}
	if name == "" {
		return nil, errors.New("cache: bloom filter: empty name")
	}
	cfg := filterConfig{prefix: defaultFilterPrefix}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.prefix == "" || strings.ContainsAny(cfg.prefix, "{} \t\r\n") {
		return nil, fmt.Errorf("cache: bloom filter: invalid key prefix %q", cfg.prefix)
	}
	m, k, err := bloomParams(expected, fpRate)
	if err != nil {
		return nil, err
	}
	if m > maxRedisBits {
		return nil, fmt.Errorf("cache: bloom filter %q: %d ids at rate %g need %d bits, a Redis bitmap holds at most 2^32: split the ids over several filters", name, expected, fpRate, m)
	}
	key := cfg.prefix + ":{" + name + "}"
	return &RedisFilter{
		rdb: rdb, name: name, expected: expected, fpRate: fpRate, m: m, k: k,
		perCall: max(1, min(rebuildBatch, maxPositionsPerCall/int(k))),
		keys:    lua.BloomKeys{Live: key, Meta: key + ":meta", Rebuild: key + ":rebuild", RebuildMeta: key + ":rebuild:meta"},
		mArg:    strconv.FormatUint(uint64(m), 10),
		kArg:    strconv.FormatUint(uint64(k), 10),
	}, nil
}

// Key is the filter's bitmap key, bloom:{<name>} (or <FilterPrefix>:{<name>}); its other keys
// start with it.
func (f *RedisFilter) Key() string { return f.keys.Live }

// Test reports whether id may have been added (false: it certainly was not). On an error the
// answer is true, "maybe present".
func (f *RedisFilter) Test(ctx context.Context, id string) (bool, error) {
	out, err := f.TestMany(ctx, []string{id})
	return out[0], err
}

// TestMany tests every id in one round trip, answering in the order of ids. On an error every
// answer is true, "maybe present".
func (f *RedisFilter) TestMany(ctx context.Context, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	fail := func(err error) ([]bool, error) {
		for i := range out {
			out[i] = true
		}
		return out, err
	}
	replies, err := f.eval(ctx, func(positions []uint64) lua.Call[lua.BloomReply] {
		return lua.BloomTest(f.keys, f.mArg, f.kArg, positions)
	}, ids)
	if err != nil {
		return fail(err)
	}
	i := 0
	for _, r := range replies {
		if err := f.status(r); err != nil {
			return fail(err)
		}
		if i+len(r.Present) > len(out) {
			return fail(errors.New("cache: bloom test: more answers than ids"))
		}
		i += copy(out[i:], r.Present)
	}
	if i != len(out) {
		return fail(fmt.Errorf("cache: bloom test: %d answers for %d ids", i, len(out)))
	}
	return out, nil
}

// Add records ids in one round trip; while a Rebuild runs they go into the filter being built
// too, so the swap cannot lose them. It returns ErrNotBuilt, recording nothing, when the filter
// does not exist and no Rebuild runs: the next Rebuild reads them from the source of truth.
//
// During a Rebuild that changes the parameters, clients with the new ones write only the filter
// being built, and clients with the old ones get ErrParamsMismatch: their ids could not reach
// the filter about to go live.
func (f *RedisFilter) Add(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	replies, err := f.eval(ctx, func(positions []uint64) lua.Call[lua.BloomReply] {
		return lua.BloomAdd(f.keys, f.mArg, f.kArg, positions)
	}, ids)
	if err != nil {
		return err
	}
	for _, r := range replies {
		if err := f.status(r); err != nil {
			return err
		}
	}
	return nil
}

// Rebuild replaces the filter's contents with ids (typically every id of the table the cache
// fronts), creating the filter if needed, and returns how many ids it read. It is also the way
// to change expected or fpRate: it builds with this client's parameters.
//
// It builds into bloom:{<name>}:rebuild, writing the ids in batches of up to 1000 per script
// call (one round trip each), then RENAMEs it over the live bitmap in one atomic script: readers see the old filter
// until that instant and never a half-built one. Ids added with Add meanwhile go into both.
//
// If the source fails, cancel ctx (context.WithCancelCause): Rebuild then drops the half-built
// bitmap, returns the cause and leaves the live filter as it was. Only one Rebuild per filter
// runs at a time (ErrRebuildRunning), across processes, guarded by a lease that every batch
// renews and that expires after a minute without one (ErrRebuildLost).
func (f *RedisFilter) Rebuild(ctx context.Context, ids iter.Seq[string]) (n int, err error) {
	token := rand.Text()
	abort := func() {
		// Clean up even when ctx is what failed; the lease expiring would do it too.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = redisctx.Err(actx, f.rdb, func(ctx context.Context) error {
			_, err := lua.BloomRebuildAbort(f.keys, token).Run(ctx, f.rdb)
			return err
		})
	}
	started, err := redisctx.DoThen(ctx, f.rdb, func(ctx context.Context) (bool, error) {
		return lua.BloomRebuildBegin(f.keys, token, f.mArg, f.kArg, rebuildLease).Run(ctx, f.rdb)
	}, func(started bool, err error) {
		if err == nil && started { // begun after the caller gave up
			abort()
		}
	})
	if err != nil {
		return 0, fmt.Errorf("cache: bloom rebuild of %q: %w", f.name, err)
	}
	if !started {
		return 0, fmt.Errorf("%w: %s is held", ErrRebuildRunning, f.keys.RebuildMeta)
	}
	committed := false
	defer func() {
		if !committed { // an error, or a panic in the source
			abort()
		}
	}()

	lost := fmt.Errorf("%w: %q, its live filter is unchanged", ErrRebuildLost, f.name)
	positions := make([]uint64, 0, f.perCall*int(f.k))
	batch := 0
	flush := func() error {
		if ctx.Err() != nil {
			return fmt.Errorf("cache: bloom rebuild of %q aborted: %w", f.name, context.Cause(ctx))
		}
		if batch == 0 {
			return nil
		}
		ok, err := redisctx.Do(ctx, f.rdb, func(ctx context.Context) (bool, error) {
			return lua.BloomRebuildAdd(f.keys, token, rebuildLease, positions).Run(ctx, f.rdb)
		})
		if err != nil {
			return fmt.Errorf("cache: bloom rebuild of %q: %w", f.name, err)
		}
		if !ok {
			return lost
		}
		positions, batch = positions[:0], 0
		return nil
	}
	for id := range ids {
		positions = f.appendPositions(positions, id)
		n, batch = n+1, batch+1
		if batch == f.perCall {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	ok, err := redisctx.Do(ctx, f.rdb, func(ctx context.Context) (bool, error) {
		return lua.BloomRebuildCommit(f.keys, token).Run(ctx, f.rdb)
	})
	if err != nil {
		return n, fmt.Errorf("cache: bloom rebuild of %q: %w", f.name, err)
	}
	if !ok {
		return n, lost
	}
	committed = true
	return n, nil
}

// Estimate reports the filter's fill from its bitmap (BITCOUNT: it reads the whole bitmap,
// m/8 bytes, so call it for monitoring, not per read): ErrNotBuilt if it does not exist,
// ErrParamsMismatch if it was built with other parameters.
func (f *RedisFilter) Estimate(ctx context.Context) (FilterEstimate, error) {
	type reading struct {
		meta []any
		set  int64
	}
	r, err := redisctx.Do(ctx, f.rdb, func(ctx context.Context) (reading, error) {
		var meta *redis.SliceCmd
		var set *redis.IntCmd
		_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			meta = p.HMGet(ctx, f.keys.Meta, "m", "k")
			set = p.BitCount(ctx, f.keys.Live, nil)
			return nil
		})
		return reading{meta.Val(), set.Val()}, err
	})
	if err != nil {
		return FilterEstimate{}, fmt.Errorf("cache: bloom filter %q: %w", f.name, err)
	}
	if len(r.meta) != 2 || r.meta[0] == nil {
		return FilterEstimate{}, fmt.Errorf("%w: %q", ErrNotBuilt, f.name)
	}
	if r.meta[0] != f.mArg || r.meta[1] != f.kArg {
		return FilterEstimate{}, fmt.Errorf("%w: %q has m=%v k=%v, this client m=%d k=%d", ErrParamsMismatch, f.name, r.meta[0], r.meta[1], f.m, f.k)
	}
	return estimate(uint64(f.m), uint64(f.k), uint64(r.set)), nil
}

// appendPositions appends id's k bit positions: the ones bloom.BloomFilter sets for id.
func (f *RedisFilter) appendPositions(positions []uint64, id string) []uint64 {
	for _, loc := range bloom.Locations([]byte(id), f.k) {
		positions = append(positions, loc%uint64(f.m))
	}
	return positions
}

// eval runs the call that call builds once per chunk of ids (given the chunk's bit
// positions), every chunk in one pipeline, and returns the replies in chunk order.
func (f *RedisFilter) eval(ctx context.Context, call func(positions []uint64) lua.Call[lua.BloomReply], ids []string) ([]lua.BloomReply, error) {
	var calls []lua.Call[lua.BloomReply]
	for len(ids) > 0 {
		c := ids[:min(len(ids), f.perCall)]
		ids = ids[len(c):]
		positions := make([]uint64, 0, len(c)*int(f.k))
		for _, id := range c {
			positions = f.appendPositions(positions, id)
		}
		calls = append(calls, call(positions))
	}
	replies, err := redisctx.Do(ctx, f.rdb, func(ctx context.Context) ([]lua.BloomReply, error) {
		return f.evalChunks(ctx, calls)
	})
	if err != nil {
		return nil, fmt.Errorf("cache: bloom filter %q: %w", f.name, err)
	}
	return replies, nil
}

// evalChunks runs calls in one pipeline.
func (f *RedisFilter) evalChunks(ctx context.Context, calls []lua.Call[lua.BloomReply]) ([]lua.BloomReply, error) {
	if len(calls) == 1 { // Run loads the script on NOSCRIPT by itself.
		r, err := calls[0].Run(ctx, f.rdb)
		return []lua.BloomReply{r}, err
	}
	run := func(bySHA bool) ([]*lua.Pending[lua.BloomReply], error) {
		pending := make([]*lua.Pending[lua.BloomReply], len(calls))
		_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range calls {
				if bySHA {
					pending[i] = c.Queue(ctx, p)
				} else {
					pending[i] = c.QueueEval(ctx, p)
				}
			}
			return nil
		})
		return pending, err
	}
	pending, err := run(true)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Script cache empty (restart, failover, SCRIPT FLUSH): send the source once more. Safe
		// to repeat: setting bits is idempotent and testing them reads only.
		pending, err = run(false)
	}
	if err != nil {
		return nil, err
	}
	replies := make([]lua.BloomReply, len(pending))
	for i, p := range pending {
		if replies[i], err = p.Result(); err != nil {
			return nil, err
		}
	}
	return replies, nil
}

// status turns a test or add script's status into an error (nil: done).
func (f *RedisFilter) status(r lua.BloomReply) error {
	switch r.Status {
	case lua.BloomDone:
		return nil
	case lua.BloomNotBuilt:
		return fmt.Errorf("%w: %q (no %s): call Rebuild with every existing id; until then every id is maybe present", ErrNotBuilt, f.name, f.keys.Live)
	}
	which := "filter"
	if r.Status == lua.BloomRebuildMismatch {
		which = "filter being rebuilt"
	}
	return fmt.Errorf("%w: the %s %q in Redis has m=%s k=%s, this client computes m=%d k=%d from expected=%d fpRate=%g; call Rebuild to rebuild it with the new parameters (or use the old ones)",
		ErrParamsMismatch, which, f.name, r.M, r.K, f.m, f.k, f.expected, f.fpRate)
}
