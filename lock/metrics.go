package lock

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lock package's Prometheus collectors. One Metrics can serve every Client and
// Redlock of a process.
type Metrics struct {
	// Lost counts locks lost while held: a lease that ran out without renewal or reached
	// MaxHold, a lock the watchdog, Extend or Release found gone or taken over. Each lost
	// lock counts once. Work done under a lost lock ran without exclusion (fencing tokens
	// are what still protects it).
	Lost prometheus.Counter
}

// NewMetrics creates the collectors and registers them with reg (if not nil). On a registry
// that has them already (another Client of the process), it returns those.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{Lost: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "surge_lock_lost_total", Help: "Locks lost while held (lease ran out, found gone or taken over, MaxHold reached); each counted once.",
	})}
	if reg == nil {
		return m
	}
	if err := reg.Register(m.Lost); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if !errors.As(err, &dup) {
			panic(err)
		}
		m.Lost = dup.ExistingCollector.(prometheus.Counter)
	}
	return m
}

// countLost counts a lock lost, unless m is nil.
func (m *Metrics) countLost() {
	if m != nil {
		m.Lost.Inc()
	}
}
