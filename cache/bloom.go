package cache

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
)

// Filter guards the read path against cache penetration: a miss of an id the filter has never
// seen is answered "absent" without the database. The cache asks it only about ids nothing is
// cached for, with a context bounded by Options.RedisTimeout; implementations must return when
// it ends.
//
// Test answers false for "definitely absent" and true for "maybe present". A Bloom filter has no
// false negatives, only false positives (about the configured rate once it holds the expected
// number of ids), so a false answer is safe to trust and a true answer sends the lookup on.
//
// When a filter cannot answer (Redis down, filter not built, parameters changed) the answers are
// true, "maybe present", together with the error: a filter that is out of order must degrade to
// the unguarded read path, never turn an existing row into a miss. The cache counts such errors
// and caches absences while they last.
//
// A filter that is not a *RedisFilter is taken to be per process: when any process creates an
// id (Invalidate with Created) every process adds it to its own filter.
type Filter interface {
	Test(ctx context.Context, id string) (bool, error)
	TestMany(ctx context.Context, ids []string) ([]bool, error)
	Add(ctx context.Context, ids ...string) error
}

var (
	_ Filter = (*LocalFilter)(nil)
	_ Filter = (*RedisFilter)(nil)
)

var (
	// ErrNotBuilt means the Redis filter does not exist (never built, or Redis lost it): Test
	// answers "maybe present" for every id and Add records nothing until Rebuild creates it.
	ErrNotBuilt = errors.New("cache: bloom filter not built")
	// ErrParamsMismatch means the filter in Redis was built with another size m or hash count k
	// than this client computes (expected or fpRate changed): the bit positions would not match,
	// so the client refuses to read or write it. Rebuild it with the new parameters.
	ErrParamsMismatch = errors.New("cache: bloom filter parameters differ")
	// ErrRebuildRunning means another Rebuild of the same filter holds the rebuild lease.
	ErrRebuildRunning = errors.New("cache: bloom filter rebuild already running")
	// ErrRebuildLost means a Rebuild lost its lease (it was slower than the lease between two
	// batches, or the keys were deleted) and stopped without touching the live filter.
	ErrRebuildLost = errors.New("cache: bloom filter rebuild lost its lease")
)

// rebuildBatch is how many ids a rebuild collects before writing them in one call.
const rebuildBatch = 1000

// bloomParams validates the constructor arguments and derives the bit count m and the hash
// count k the same way bloom.NewWithEstimates does, so a LocalFilter and a RedisFilter built
// from the same arguments set the same bits.
func bloomParams(expected uint, fpRate float64) (m, k uint, err error) {
	if expected == 0 {
		return 0, 0, errors.New("cache: bloom filter: expected number of ids must be > 0")
	}
	if !(fpRate > 0 && fpRate < 1) { // also rejects NaN
		return 0, 0, fmt.Errorf("cache: bloom filter: false-positive rate must be in (0, 1), got %g", fpRate)
	}
	m, k = bloom.EstimateParameters(expected, fpRate)
	return m, k, nil
}

// LocalFilter is an in-process Bloom filter (a bloom.BloomFilter behind a RWMutex): no network,
// but each process holds its own copy and must fill it itself. It starts empty, answering
// "absent" for every id, so fill it (Rebuild or Add) before it guards reads.
type LocalFilter struct {
	m, k uint

	mu   sync.RWMutex
	live *bloom.BloomFilter
	next *bloom.BloomFilter // being rebuilt; Add writes here too so no add is lost by the swap
}

// NewLocalFilter returns an empty filter sized for expected ids at false-positive rate fpRate
// (0 < fpRate < 1).
func NewLocalFilter(expected uint, fpRate float64) (*LocalFilter, error) {
	m, k, err := bloomParams(expected, fpRate)
	if err != nil {
		return nil, err
	}
	return &LocalFilter{m: m, k: k, live: bloom.New(m, k)}, nil
}

// Test reports whether id may have been added (false: it certainly was not).
func (f *LocalFilter) Test(_ context.Context, id string) (bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.live.TestString(id), nil
}

// TestMany tests every id, answering in the order of ids.
func (f *LocalFilter) TestMany(_ context.Context, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	f.mu.RLock()
	defer f.mu.RUnlock()
	for i, id := range ids {
		out[i] = f.live.TestString(id)
	}
	return out, nil
}

// Add records ids (in the filter being rebuilt too, if a Rebuild runs).
func (f *LocalFilter) Add(_ context.Context, ids ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		f.live.AddString(id)
		if f.next != nil {
			f.next.AddString(id)
		}
	}
	return nil
}

// Rebuild replaces the filter's contents with ids, returning how many ids it read. It builds a
// new filter aside and swaps it in at the end, so readers see the old contents until then and
// never a half-built filter; ids added meanwhile go into both. If the source fails, cancel ctx
// (context.WithCancelCause): Rebuild then returns the cause and keeps the old contents. Only one
// Rebuild runs at a time (ErrRebuildRunning).
func (f *LocalFilter) Rebuild(ctx context.Context, ids iter.Seq[string]) (n int, err error) {
	f.mu.Lock()
	if f.next != nil {
		f.mu.Unlock()
		return 0, ErrRebuildRunning
	}
	next := bloom.New(f.m, f.k)
	f.next = next
	f.mu.Unlock()
	complete := false // stays false on an error or a panic in the source: keep the old filter
	defer func() {
		f.mu.Lock()
		if complete {
			f.live = next
		}
		f.next = nil
		f.mu.Unlock()
	}()

	batch := make([]string, 0, rebuildBatch)
	flush := func() error {
		if ctx.Err() != nil {
			return fmt.Errorf("cache: bloom rebuild aborted: %w", context.Cause(ctx))
		}
		f.mu.Lock()
		for _, id := range batch {
			next.AddString(id)
		}
		f.mu.Unlock()
		batch = batch[:0]
		return nil
	}
	for id := range ids {
		n++
		if batch = append(batch, id); len(batch) == rebuildBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	complete = true
	return n, nil
}

// FilterEstimate is what a filter's bits say about its contents: a filter filled past the
// number of ids it was sized for lets far more missing ids through than its configured rate.
type FilterEstimate struct {
	Bits, BitsSet uint64
	// IDs is the estimated number of distinct ids added, -(m/k)·ln(1 - set/m).
	IDs uint64
	// FalsePositiveRate is the chance that an id never added passes, (set/m)^k.
	FalsePositiveRate float64
}

func estimate(m, k, set uint64) FilterEstimate {
	e := FilterEstimate{Bits: m, BitsSet: set}
	if m == 0 || k == 0 {
		return e
	}
	fill := float64(set) / float64(m)
	e.FalsePositiveRate = math.Pow(fill, float64(k))
	if fill < 1 {
		e.IDs = uint64(math.Round(-float64(m) / float64(k) * math.Log(1-fill)))
	} else {
		e.IDs = math.MaxUint64
	}
	return e
}

// Estimate reports the filter's fill, from its bits.
func (f *LocalFilter) Estimate(context.Context) (FilterEstimate, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return estimate(uint64(f.m), uint64(f.k), uint64(f.live.BitSet().Count())), nil
}
