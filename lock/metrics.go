package lock

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lock package's Prometheus collectors. One Metrics can serve every Client and
// Redlock of a process.
type Metrics struct {
	// Lost counts locks lost while held: a lease that ran out without renewal or reached
	// MaxHold, a lock the watchdog, Extend or Release found gone or taken over, a renewal the
	// replicas did not acknowledge. Each lost lock counts once. Work done under a lost lock
	// ran without exclusion (fencing tokens are what still protects it).
	Lost prometheus.Counter
	// NotReplicated counts acquisitions and renewals that fewer than Options.ReplicaAcks
	// replicas acknowledged in time (ErrNotReplicated), once per operation: acquisitions
	// undone, renewals that lost their lock (those count as Lost too).
	NotReplicated prometheus.Counter
}

// NewMetrics creates the collectors and registers them with reg (if not nil). On a registry
// that has them already (another Client of the process), it returns those.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_lock_lost_total", Help: "Locks lost while held (lease ran out, found gone or taken over, MaxHold reached, renewal not replicated); each counted once.",
		}),
		NotReplicated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_lock_not_replicated_total", Help: "Lock acquisitions (undone) and renewals (lock lost) that fewer replicas than ReplicaAcks acknowledged in time.",
		}),
	}
	if reg == nil {
		return m
	}
	m.Lost = register(reg, m.Lost)
	m.NotReplicated = register(reg, m.NotReplicated)
	return m
}

// register registers c with reg, or returns the collector reg has already under its name.
func register(reg prometheus.Registerer, c prometheus.Counter) prometheus.Counter {
	if err := reg.Register(c); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if !errors.As(err, &dup) {
			panic(err)
		}
		return dup.ExistingCollector.(prometheus.Counter)
	}
	return c
}

// countLost counts a lock lost, unless m is nil.
func (m *Metrics) countLost() {
	if m != nil {
		m.Lost.Inc()
	}
}

// countNotReplicated counts a write the replicas did not acknowledge, unless m is nil.
func (m *Metrics) countNotReplicated() {
	if m != nil {
		m.NotReplicated.Inc()
	}
}
