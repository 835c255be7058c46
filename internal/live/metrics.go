package live

import "github.com/prometheus/client_golang/prometheus"

// statser is what the metrics read from each feed.
type statser interface {
	stats() (pollers, subscribers int, polls int64)
}

// newMetrics registers gauges of pollers and subscribers and a counter of polls, per feed.
func newMetrics(reg prometheus.Registerer, feeds ...interface {
	statser
	feedName() string
}) {
	for _, f := range feeds {
		labels := prometheus.Labels{"feed": f.feedName()}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "surge_live_pollers", Help: "Live subscription pollers running (one per voucher or order with subscribers).", ConstLabels: labels,
			}, func() float64 { p, _, _ := f.stats(); return float64(p) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "surge_live_subscribers", Help: "Live subscriptions open.", ConstLabels: labels,
			}, func() float64 { _, s, _ := f.stats(); return float64(s) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "surge_live_polls_total", Help: "Polls made by live subscription pollers.", ConstLabels: labels,
			}, func() float64 { _, _, n := f.stats(); return float64(n) }),
		)
	}
}

func (f *feed[K, V]) feedName() string { return f.name }
