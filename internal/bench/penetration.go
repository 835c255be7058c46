package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
)

// PenetrationResult is the final JSON line of cache-penetration.
type PenetrationResult struct {
	Scenario    string  `json:"scenario"`
	Redis       string  `json:"redis"`
	KeyPrefix   string  `json:"key_prefix"`
	Existing    int     `json:"existing"`
	Missing     int     `json:"missing"`
	FPRate      float64 `json:"fp"`
	Mode        string  `json:"mode"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	Read        int     `json:"missing_read"`
	Errors      int64   `json:"errors"`
	// Ids that reached the database (the Bloom filter's false positives), and loader calls
	// (with LoadMany one call loads a whole batch's false positives).
	DBLoads      int64   `json:"db_loads"`
	DBLoadCalls  int64   `json:"db_load_calls"`
	DBLoadRatio  float64 `json:"db_load_ratio"`
	AbsentCached bool    `json:"absent_with_filter"`
	DBLoadsAgain int64   `json:"db_loads_repeat"`
	KeysBefore   int     `json:"redis_keys_before"`
	KeysCreated  int     `json:"redis_keys_created"`
	AbsentKeys   int     `json:"absence_markers"`
	ValueKeys    int     `json:"value_keys"`
	LeaseKeys    int     `json:"lease_keys_left"`
	OtherKeys    int     `json:"other_keys"`
	FilterBytes  int64   `json:"bloom_bytes"`
	BuildMS      float64 `json:"bloom_build_ms"`
	ElapsedMS    float64 `json:"elapsed_ms"`
	ReadsPerSec  float64 `json:"reads_per_sec"`
	ExistChecked int     `json:"existing_checked"`
	FalseNeg     int     `json:"existing_not_found"`
	TargetRatio  bool    `json:"target_ratio_met"`
	TargetKeys   bool    `json:"target_zero_keys_met"`
}

func runPenetration(ctx context.Context, args []string, out *output) error {
	fs, com := newFlags("cache-penetration", out)
	existing := fs.Int("existing", 100_000, "ids that exist (added to the Bloom filter)")
	missing := fs.Int("missing", 1_000_000, "distinct never-existing ids read through the cache")
	fp := fs.Float64("fp", 0.01, "Bloom filter false-positive rate")
	batch := fs.Int("batch", 500, "ids per read: 1 = GetOrLoad per id, more = LoadMany batches")
	concurrency := fs.Int("concurrency", 8, "concurrent readers (use ~64 with -batch 1)")
	absentWithFilter := fs.Bool("absent-with-filter", false, "set cache.Options.AbsentWithFilter: cache the absences the filter's false positives find")
	repeat := fs.Bool("repeat", true, "read the missing ids a second time and count the database loads again")
	check := fs.Int("check-existing", 1000, "existing ids read afterwards to check the filter lets them through")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out.jsonOnly = com.jsonOnly
	if *existing < 1 || *missing < 1 || *batch < 1 || *concurrency < 1 || *existing > 100_000_000 || *missing > 100_000_000 {
		return errors.New("bench: -existing and -missing must be in [1, 1e8]; -batch and -concurrency ≥ 1")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, err := com.client(ctx, max(10, *concurrency+4))
	if err != nil {
		return err
	}
	defer rdb.Close()

	run := runID()
	prefix := "bench-pen-" + run // the cache's key prefix: every key it creates matches prefix:*
	pattern := prefix + ":*"
	filter, err := cache.NewRedisFilter(rdb, prefix, uint(*existing), *fp)
	if err != nil {
		return err
	}
	fkey := filter.Key()
	defer func() { _ = unlink(ctx, rdb, fkey, fkey+":meta", fkey+":rebuild", fkey+":rebuild:meta") }()
	defer func() { _, _ = deleteKeys(ctx, rdb, pattern) }()

	mode := "GetOrLoad"
	if *batch > 1 {
		mode = "LoadMany"
	}
	out.printf("cache-penetration: %d existing ids in a Redis Bloom filter (fp %g), %d never-existing ids read with %s (batch %d, %d readers), Redis %s\n",
		*existing, *fp, *missing, mode, *batch, *concurrency, com.addrs)
	res := PenetrationResult{Scenario: "cache-penetration", Redis: com.addrs, KeyPrefix: prefix, Existing: *existing, Missing: *missing,
		FPRate: *fp, Mode: mode, Batch: *batch, Concurrency: *concurrency, AbsentCached: *absentWithFilter}

	// Existing ids are 1..existing; never-existing ones are existing+1..existing+missing.
	t0 := time.Now()
	n, err := filter.Rebuild(ctx, func(yield func(string) bool) {
		for i := 1; i <= *existing; i++ {
			if !yield(strconv.Itoa(i)) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	res.BuildMS = ms(time.Since(t0))
	res.FilterBytes, _ = rdb.StrLen(ctx, fkey).Result()
	out.printf("  filter: %d ids, %d bytes, built in %.0f ms\n", n, res.FilterBytes, res.BuildMS)

	if res.KeysBefore, err = countKeys(ctx, rdb, pattern); err != nil {
		return err
	}

	// The "database": ids 1..existing exist. Every id that reaches it is counted.
	var dbLoads, dbCalls, errCount atomic.Int64
	exists := func(id string) bool {
		n, err := strconv.Atoi(id)
		return err == nil && n >= 1 && n <= *existing
	}
	load := func(_ context.Context, id string) (Payload, error) {
		dbLoads.Add(1)
		dbCalls.Add(1)
		if exists(id) {
			n, _ := strconv.Atoi(id)
			return payloadFor(int64(n)), nil
		}
		return Payload{}, cache.ErrNotFound
	}
	loadMany := func(_ context.Context, ids []string) (map[string]Payload, error) {
		dbLoads.Add(int64(len(ids)))
		dbCalls.Add(1)
		m := map[string]Payload{}
		for _, id := range ids {
			if exists(id) {
				n, _ := strconv.Atoi(id)
				m[id] = payloadFor(int64(n))
			}
		}
		return m, nil
	}
	c, err := cache.New[Payload](ctx, rdb, cache.Options{Prefix: prefix, Name: "shop", Filter: filter, AbsentWithFilter: *absentWithFilter, AbsentTTL: 10 * time.Minute, TTL: 10 * time.Minute})
	if err != nil {
		return err
	}
	defer c.Close()

	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errCount.Add(1)
		errOnce.Do(func() { firstErr = err })
	}
	// Readers take batches of ids from a shared counter until every missing id was read.
	var read atomic.Int64
	pass := func() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < *concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids := make([]string, 0, *batch)
				for ctx.Err() == nil {
					from := next.Add(int64(*batch)) - int64(*batch)
					if from >= int64(*missing) {
						return
					}
					to := min(from+int64(*batch), int64(*missing))
					ids = ids[:0]
					for i := from; i < to; i++ {
						ids = append(ids, strconv.FormatInt(int64(*existing)+1+i, 10))
					}
					if *batch == 1 {
						if _, err := c.GetOrLoad(ctx, ids[0], load); !errors.Is(err, cache.ErrNotFound) {
							fail(fmt.Errorf("id %s: %v, want ErrNotFound", ids[0], err))
						}
					} else {
						m, err := c.LoadMany(ctx, ids, loadMany)
						if err != nil {
							fail(err)
						} else if len(m) != 0 {
							fail(fmt.Errorf("LoadMany found %d never-existing ids", len(m)))
						}
					}
					read.Add(to - from)
				}
			}()
		}
		wg.Wait()
	}
	t1 := time.Now()
	pass()
	elapsed := time.Since(t1)
	res.Read = int(read.Load())
	res.ElapsedMS = ms(elapsed)
	res.ReadsPerSec = float64(res.Read) / elapsed.Seconds()
	res.DBLoads, res.DBLoadCalls, res.Errors = dbLoads.Load(), dbCalls.Load(), errCount.Load()
	if res.Read > 0 {
		res.DBLoadRatio = float64(res.DBLoads) / float64(res.Read)
	}
	if ctx.Err() != nil && res.Read < *missing {
		return fmt.Errorf("bench: cache-penetration did not finish in %v (%d of %d ids read)", *timeout, res.Read, *missing)
	}

	// What the run left in Redis: every key under the cache's prefix, classified.
	err = scanKeys(ctx, rdb, pattern, func(ctx context.Context, node *redis.Client, keys []string) error {
		cmds := make([]*redis.StringCmd, len(keys))
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				cmds[i] = p.Get(ctx, k)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for i, k := range keys {
			v, err := cmds[i].Bytes()
			switch {
			case err != nil:
				res.OtherKeys++ // not a string (or gone meanwhile)
			case len(k) > 6 && k[len(k)-6:] == ":lease":
				res.LeaseKeys++
			case len(v) == 1 && v[0] == 0: // the cache's absence marker (tag byte 0x00)
				res.AbsentKeys++
			case len(v) > 0 && v[0] == 1:
				res.ValueKeys++
			default:
				res.OtherKeys++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.KeysCreated = res.AbsentKeys + res.ValueKeys + res.LeaseKeys + res.OtherKeys - res.KeysBefore

	// The same ids again: with the false positives' absences cached they stop at Redis,
	// without they reach the database once more.
	if *repeat && ctx.Err() == nil {
		before := dbLoads.Load()
		read.Store(0)
		pass()
		res.DBLoadsAgain = dbLoads.Load() - before
		res.Errors = errCount.Load()
	}

	// No false negatives: existing ids still load (after the count, since they create keys).
	for i := 1; i <= min(*check, *existing) && ctx.Err() == nil; i++ {
		id := strconv.Itoa(1 + (i-1)*(*existing/min(*check, *existing)))
		res.ExistChecked++
		if v, err := c.GetOrLoad(ctx, id, load); err != nil || strconv.FormatInt(v.ID, 10) != id {
			res.FalseNeg++
		}
	}

	res.TargetRatio = res.DBLoadRatio <= 0.012
	res.TargetKeys = res.KeysCreated == 0
	out.printf("  read %d missing ids in %.2f s (%.0f/s), errors %d\n", res.Read, elapsed.Seconds(), res.ReadsPerSec, res.Errors)
	if firstErr != nil {
		out.printf("  first error: %v\n", firstErr)
	}
	out.printf("  database loads %d of %d (ratio %.4f%%, target ≤ 1.2%%) in %d loader calls\n", res.DBLoads, res.Read, 100*res.DBLoadRatio, res.DBLoadCalls)
	out.printf("  Redis keys created under %s: %d = %d absence markers + %d values + %d leases + %d other\n",
		pattern, res.KeysCreated, res.AbsentKeys, res.ValueKeys, res.LeaseKeys, res.OtherKeys)
	if *repeat {
		out.printf("  the same %d ids read again: %d database loads\n", *missing, res.DBLoadsAgain)
	}
	if *absentWithFilter {
		out.printf("  With AbsentWithFilter each false positive (≈ fp × missing) reaches the database once and is\n" +
			"  cached as an absence marker, so a repeated probe of that id stops at Redis: one key per false\n" +
			"  positive, and 0 keys would need the default (not caching those absences).\n")
	} else {
		out.printf("  By default (AbsentWithFilter off) absences found by the filter's false positives are not\n" +
			"  cached, so missing ids create no keys; the price is that a false-positive id reaches the\n" +
			"  database on every read (-absent-with-filter caches them: one key each, no repeat loads).\n")
	}
	out.printf("  existing ids checked afterwards: %d, not found: %d (a Bloom filter has no false negatives)\n", res.ExistChecked, res.FalseNeg)
	return out.json(res)
}
