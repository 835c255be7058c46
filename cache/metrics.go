package cache

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the cache's Prometheus collectors, labelled by cache name. One Metrics can
// serve many caches; register it once.
type Metrics struct {
	Hits, LocalHits, Misses, AbsentHits *prometheus.CounterVec
	BloomRejects, BloomFalsePositives   *prometheus.CounterVec
	FilterErrors                        *prometheus.CounterVec
	Loads, LoadErrors, StaleServed      *prometheus.CounterVec
	StaleSetsRejected, OutageLoads      *prometheus.CounterVec
	RebuildsDropped                     *prometheus.CounterVec
	RedisErrors, BreakerOpens           *prometheus.CounterVec
	StaleLocalServed, DecodeErrors      *prometheus.CounterVec
	InvalidationRetries                 *prometheus.CounterVec
	InvalidationRetryErrors             *prometheus.CounterVec
	InvalidatorErrors                   *prometheus.CounterVec
	LockWaits                           *prometheus.HistogramVec
	RebuildQueue, InvalidationsPending  *prometheus.GaugeVec
}

// NewMetrics creates the collectors and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	var all []prometheus.Collector
	counter := func(name, help string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "surge", Subsystem: "cache", Name: name, Help: help}, []string{"cache"})
		all = append(all, c)
		return c
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "surge", Subsystem: "cache", Name: name, Help: help}, []string{"cache"})
		all = append(all, g)
		return g
	}
	m := &Metrics{
		Hits:                    counter("hits_total", "Reads answered with a value from Redis."),
		LocalHits:               counter("local_hits_total", "Reads answered by the in-process L1 (values and absences)."),
		Misses:                  counter("misses_total", "Reads that found nothing cached."),
		AbsentHits:              counter("absent_hits_total", "Reads answered by a cached absence marker."),
		BloomRejects:            counter("bloom_rejects_total", "Misses answered absent by the Bloom filter without the loader."),
		BloomFalsePositives:     counter("bloom_false_positives_total", "Ids the Bloom filter let through that the loader did not find: with bloom_rejects_total, the filter's observed false-positive rate among missing ids."),
		FilterErrors:            counter("filter_errors_total", "Bloom filter checks that failed (not built, deleted, parameters changed, Redis error): the miss went on unfiltered and its absence was cached."),
		Loads:                   counter("loads_total", "Loader (database) calls."),
		LoadErrors:              counter("load_errors_total", "Loader calls that failed (not counting ErrNotFound), panics included."),
		StaleServed:             counter("stale_served_total", "Logically expired values served while a rebuild runs."),
		StaleSetsRejected:       counter("stale_sets_rejected_total", "Write-backs refused because the lease was revoked by a write."),
		OutageLoads:             counter("outage_loads_total", "Loader calls made because Redis failed."),
		RebuildsDropped:         counter("rebuilds_dropped_total", "Rebuilds not queued because the pool was full."),
		RedisErrors:             counter("redis_errors_total", "Redis calls that failed for want of Redis (timeouts, connection errors, LOADING…)."),
		BreakerOpens:            counter("breaker_opens_total", "Times the breaker opened: Redis skipped for the cool-down."),
		StaleLocalServed:        counter("stale_local_served_total", "L1 copies served past their TTL because Redis failed."),
		DecodeErrors:            counter("decode_errors_total", "Cached entries this cache could not decode (another Version or schema, foreign bytes): dropped and read as misses."),
		InvalidationRetries:     counter("invalidation_retries_total", "Retries of a delete that failed after Invalidate's write (Redis down)."),
		InvalidationRetryErrors: counter("invalidation_retry_errors_total", "Those retries that failed again: the delete stays pending (and its intent, for RunInvalidator)."),
		InvalidatorErrors:       counter("invalidator_errors_total", "RunInvalidator passes that failed (Redis errors); the intents stay for the next pass."),
		LockWaits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "surge", Subsystem: "cache", Name: "lock_wait_seconds",
			Help:    "Time spent waiting for another process's load.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"cache"}),
		RebuildQueue:         gauge("rebuild_queue_depth", "Rebuilds waiting in the pool."),
		InvalidationsPending: gauge("invalidations_pending", "Invalidations whose write committed and whose delete waits for Redis (retried in-process)."),
	}
	all = append(all, m.LockWaits)
	if reg != nil {
		reg.MustRegister(all...)
	}
	return m
}

// stats is a Metrics bound to one cache name. Without Metrics the collectors are private,
// unregistered ones: counting stays branch-free and costs one atomic add.
type stats struct {
	hits, localHits, misses, absentHits prometheus.Counter
	bloomRejects, bloomFalsePositives   prometheus.Counter
	filterErrors                        prometheus.Counter
	loads, loadErrors, staleServed      prometheus.Counter
	staleSetsRejected, outageLoads      prometheus.Counter
	rebuildsDropped                     prometheus.Counter
	redisErrors, breakerOpens           prometheus.Counter
	staleLocalServed, decodeErrors      prometheus.Counter
	invalidationRetries                 prometheus.Counter
	invalidationRetryErrors             prometheus.Counter
	invalidatorErrors                   prometheus.Counter
	lockWaits                           prometheus.Observer
	rebuildQueue, invalidationsPending  prometheus.Gauge
}

func (m *Metrics) bind(name string) *stats {
	if m == nil {
		m = NewMetrics(nil)
	}
	return &stats{
		hits:                    m.Hits.WithLabelValues(name),
		localHits:               m.LocalHits.WithLabelValues(name),
		misses:                  m.Misses.WithLabelValues(name),
		absentHits:              m.AbsentHits.WithLabelValues(name),
		bloomRejects:            m.BloomRejects.WithLabelValues(name),
		bloomFalsePositives:     m.BloomFalsePositives.WithLabelValues(name),
		filterErrors:            m.FilterErrors.WithLabelValues(name),
		loads:                   m.Loads.WithLabelValues(name),
		loadErrors:              m.LoadErrors.WithLabelValues(name),
		staleServed:             m.StaleServed.WithLabelValues(name),
		staleSetsRejected:       m.StaleSetsRejected.WithLabelValues(name),
		outageLoads:             m.OutageLoads.WithLabelValues(name),
		rebuildsDropped:         m.RebuildsDropped.WithLabelValues(name),
		redisErrors:             m.RedisErrors.WithLabelValues(name),
		breakerOpens:            m.BreakerOpens.WithLabelValues(name),
		staleLocalServed:        m.StaleLocalServed.WithLabelValues(name),
		decodeErrors:            m.DecodeErrors.WithLabelValues(name),
		invalidationRetries:     m.InvalidationRetries.WithLabelValues(name),
		invalidationRetryErrors: m.InvalidationRetryErrors.WithLabelValues(name),
		invalidatorErrors:       m.InvalidatorErrors.WithLabelValues(name),
		lockWaits:               m.LockWaits.WithLabelValues(name),
		rebuildQueue:            m.RebuildQueue.WithLabelValues(name),
		invalidationsPending:    m.InvalidationsPending.WithLabelValues(name),
	}
}

func (s *stats) waited(d time.Duration) { s.lockWaits.Observe(d.Seconds()) }
