package cache

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the cache's Prometheus collectors, labelled by cache name. One Metrics can
// serve many caches; register it once.
type Metrics struct {
	Hits, LocalHits, Misses, AbsentHits *prometheus.CounterVec
	BloomRejects                        *prometheus.CounterVec
	Loads, LoadErrors, StaleServed      *prometheus.CounterVec
	StaleSetsRejected, OutageLoads      *prometheus.CounterVec
	RebuildsDropped                     *prometheus.CounterVec
	RedisErrors, BreakerOpens           *prometheus.CounterVec
	StaleLocalServed, DecodeErrors      *prometheus.CounterVec
	LockWaits                           *prometheus.HistogramVec
	RebuildQueue                        *prometheus.GaugeVec
}

// NewMetrics creates the collectors and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "surge", Subsystem: "cache", Name: name, Help: help}, []string{"cache"})
	}
	m := &Metrics{
		Hits:              counter("hits_total", "Reads answered with a value from Redis."),
		LocalHits:         counter("local_hits_total", "Reads answered by the in-process L1 (values and absences)."),
		Misses:            counter("misses_total", "Reads that found nothing cached."),
		AbsentHits:        counter("absent_hits_total", "Reads answered by a cached absence marker."),
		BloomRejects:      counter("bloom_rejects_total", "Reads answered absent by the Bloom filter without Redis or the loader."),
		Loads:             counter("loads_total", "Loader (database) calls."),
		LoadErrors:        counter("load_errors_total", "Loader calls that failed (not counting ErrNotFound)."),
		StaleServed:       counter("stale_served_total", "Logically expired values served while a rebuild runs."),
		StaleSetsRejected: counter("stale_sets_rejected_total", "Write-backs refused because the lease was revoked by a write."),
		OutageLoads:       counter("outage_loads_total", "Loader calls made because Redis failed."),
		RebuildsDropped:   counter("rebuilds_dropped_total", "Rebuilds not queued because the pool was full."),
		RedisErrors:       counter("redis_errors_total", "Redis calls that failed for want of Redis (timeouts, connection errors, LOADING…)."),
		BreakerOpens:      counter("breaker_opens_total", "Times the breaker opened: Redis skipped for the cool-down."),
		StaleLocalServed:  counter("stale_local_served_total", "L1 copies served past their TTL because Redis failed."),
		DecodeErrors:      counter("decode_errors_total", "Cached entries this cache could not decode (another Version or schema, foreign bytes): dropped and read as misses."),
		LockWaits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "surge", Subsystem: "cache", Name: "lock_wait_seconds",
			Help:    "Time spent waiting for another process's load.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"cache"}),
		RebuildQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "surge", Subsystem: "cache", Name: "rebuild_queue_depth", Help: "Rebuilds waiting in the pool.",
		}, []string{"cache"}),
	}
	if reg != nil {
		reg.MustRegister(m.Hits, m.LocalHits, m.Misses, m.AbsentHits, m.BloomRejects, m.Loads, m.LoadErrors,
			m.StaleServed, m.StaleSetsRejected, m.OutageLoads, m.RebuildsDropped,
			m.RedisErrors, m.BreakerOpens, m.StaleLocalServed, m.DecodeErrors, m.LockWaits, m.RebuildQueue)
	}
	return m
}

// stats is a Metrics bound to one cache name. Without Metrics the collectors are private,
// unregistered ones: counting stays branch-free and costs one atomic add.
type stats struct {
	hits, localHits, misses, absentHits prometheus.Counter
	bloomRejects                        prometheus.Counter
	loads, loadErrors, staleServed      prometheus.Counter
	staleSetsRejected, outageLoads      prometheus.Counter
	rebuildsDropped                     prometheus.Counter
	redisErrors, breakerOpens           prometheus.Counter
	staleLocalServed, decodeErrors      prometheus.Counter
	lockWaits                           prometheus.Observer
	rebuildQueue                        prometheus.Gauge
}

func (m *Metrics) bind(name string) *stats {
	if m == nil {
		m = NewMetrics(nil)
	}
	return &stats{
		hits: m.Hits.WithLabelValues(name), localHits: m.LocalHits.WithLabelValues(name), misses: m.Misses.WithLabelValues(name),
		absentHits: m.AbsentHits.WithLabelValues(name), bloomRejects: m.BloomRejects.WithLabelValues(name),
		loads: m.Loads.WithLabelValues(name), loadErrors: m.LoadErrors.WithLabelValues(name),
		staleServed: m.StaleServed.WithLabelValues(name), staleSetsRejected: m.StaleSetsRejected.WithLabelValues(name),
		outageLoads: m.OutageLoads.WithLabelValues(name), rebuildsDropped: m.RebuildsDropped.WithLabelValues(name),
		redisErrors: m.RedisErrors.WithLabelValues(name), breakerOpens: m.BreakerOpens.WithLabelValues(name),
		staleLocalServed: m.StaleLocalServed.WithLabelValues(name), decodeErrors: m.DecodeErrors.WithLabelValues(name),
		lockWaits: m.LockWaits.WithLabelValues(name), rebuildQueue: m.RebuildQueue.WithLabelValues(name),
	}
}

func (s *stats) waited(d time.Duration) { s.lockWaits.Observe(d.Seconds()) }
