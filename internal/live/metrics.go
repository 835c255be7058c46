package live

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are the Hub's event counters.
type counters struct {
	events, gaps, sweeps atomic.Int64
}

// newMetrics registers the Hub's gauges and counters (surge_live_*).
func newMetrics(reg prometheus.Registerer, h *Hub) {
	type feedStats struct {
		name  string
		stats func() (topics, subscribers int)
		reads *atomic.Int64
		drops *atomic.Int64
	}
	for _, f := range []feedStats{
		{h.stock.name, h.stock.stats, &h.stock.reads, &h.stock.drops},
		{h.orders.name, h.orders.stats, &h.orders.reads, &h.orders.drops},
	} {
		labels := prometheus.Labels{"feed": f.name}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "surge_live_topics", Help: "Keys watched by live subscriptions (vouchers, orders).", ConstLabels: labels,
			}, func() float64 { t, _ := f.stats(); return float64(t) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "surge_live_subscribers", Help: "Live subscriptions open.", ConstLabels: labels,
			}, func() float64 { _, s := f.stats(); return float64(s) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "surge_live_reads_total", Help: "Reads of watched state: first reads of a key, stock reads after an event, batched catch-up and sweep reads (one per voucher).", ConstLabels: labels,
			}, func() float64 { return float64(f.reads.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "surge_live_fanout_drops_total", Help: "Values replaced in a subscriber's one-value slot before it took them (slow subscribers; the latest value still goes out).", ConstLabels: labels,
			}, func() float64 { return float64(f.drops.Load()) }),
		)
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "surge_live_events_total", Help: "Change events received from the seckill event channel.",
		}, func() float64 { return float64(h.m.events.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "surge_live_gaps_total", Help: "Possible event losses seen: (re)subscriptions, publisher sequence gaps, unreadable messages; each triggers a catch-up.",
		}, func() float64 { return float64(h.m.gaps.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "surge_live_sweeps_total", Help: "Catch-ups and periodic sweeps (every watched key read again, batched per voucher).",
		}, func() float64 { return float64(h.m.sweeps.Load()) }),
	)
}
