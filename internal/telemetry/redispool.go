package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// RedisPools reports the connection pools of Redis clients to Prometheus, each under its
// client label. go-redis counts from the client's start, so the counters are counters.
type RedisPools map[string]redis.UniversalClient

var (
	redisPoolLabels = []string{"client"}
	redisPoolDescs  = struct {
		hits, misses, timeouts, waits, waitSeconds, stale, conns, idle, pending *prometheus.Desc
	}{
		hits:        redisPoolDesc("hits_total", "Commands that found a free connection in the pool."),
		misses:      redisPoolDesc("misses_total", "Commands that found no free connection and opened or waited for one."),
		timeouts:    redisPoolDesc("timeouts_total", "Commands that gave up waiting for a connection (PoolTimeout)."),
		waits:       redisPoolDesc("waits_total", "Commands that waited for a connection."),
		waitSeconds: redisPoolDesc("wait_seconds_total", "Time commands spent waiting for a connection."),
		stale:       redisPoolDesc("stale_connections_total", "Connections closed as stale (idle too long, broken)."),
		conns:       redisPoolDesc("connections", "Connections open, idle or in use."),
		idle:        redisPoolDesc("idle_connections", "Connections open and idle."),
		pending:     redisPoolDesc("pending_requests", "Commands waiting for a connection right now."),
	}
)

func redisPoolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("surge_redis_pool_"+name, help, redisPoolLabels, nil)
}

// Describe implements prometheus.Collector.
func (p RedisPools) Describe(ch chan<- *prometheus.Desc) {
	d := redisPoolDescs
	for _, desc := range []*prometheus.Desc{d.hits, d.misses, d.timeouts, d.waits, d.waitSeconds, d.stale, d.conns, d.idle, d.pending} {
		ch <- desc
	}
}

// Collect implements prometheus.Collector: it reads each client's pool statistics.
func (p RedisPools) Collect(ch chan<- prometheus.Metric) {
	d := redisPoolDescs
	for name, rdb := range p {
		s := rdb.PoolStats()
		counter := func(desc *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, name)
		}
		gauge := func(desc *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, name)
		}
		counter(d.hits, float64(s.Hits))
		counter(d.misses, float64(s.Misses))
		counter(d.timeouts, float64(s.Timeouts))
		counter(d.waits, float64(s.WaitCount))
		counter(d.waitSeconds, time.Duration(s.WaitDurationNs).Seconds())
		counter(d.stale, float64(s.StaleConns))
		gauge(d.conns, float64(s.TotalConns))
		gauge(d.idle, float64(s.IdleConns))
		gauge(d.pending, float64(s.PendingRequests))
	}
}
