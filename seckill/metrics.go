package seckill

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/surgekit/surge/lua"
)

type metrics struct {
	grabs     *prometheus.CounterVec
	persisted prometheus.Counter
	dead      prometheus.Counter
	claimed   prometheus.Counter
	batches   prometheus.Histogram
	// gangs counts gang writes (gang.go): committed, or split into one write per voucher.
	gangs *prometheus.CounterVec
	// What a Redis that lost state sends the consumer (see rehome.go).
	rehomed, superseded, lost prometheus.Counter
	toldLost                  prometheus.Counter // orders told, lost before written (told.go)
	unacked                   prometheus.Counter // pipelines the replicas did not acknowledge (replicaack.go)
	// background counts the errors of background work that has no caller to return them to
	// (logged too), by what failed.
	background *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		grabs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_seckill_grabs_total", Help: "Grab attempts by outcome.",
		}, []string{"outcome"}),
		persisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_orders_persisted_total", Help: "Orders written to the database by this consumer.",
		}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_dead_letters_total", Help: "Order entries given up on and compensated.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_claimed_total", Help: "Pending entries taken over from an idle consumer.",
		}),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "surge_seckill_batch_seconds", Help: "Time to persist one batch of orders.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12),
		}),
		gangs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_seckill_gang_writes_total",
			Help: "Transactions writing several quiet vouchers' batches at once, by outcome: committed, or split (rolled back, then written voucher by voucher).",
		}, []string{"outcome"}),
		rehomed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_orders_rehomed_total",
			Help: "Orders stored under a fresh id because their id was another order's (Redis lost the id counter).",
		}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_orders_superseded_total",
			Help: "Orders admitted to a user who already held one (Redis lost the buyer); the user keeps the first.",
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_orders_lost_total",
			Help: "Orders recorded FAILED because Redis lost their entries while they were being written.",
		}),
		toldLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_orders_told_lost_total",
			Help: "Orders told to their users and recorded LOST: Redis lost them (a flush, a failover, an AOF's lost tail) before any consumer wrote them.",
		}),
		unacked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surge_seckill_unacknowledged_batches_total",
			Help: "Admission pipelines (one per Redis master and batch) whose WAIT reported fewer replicas than ReplicaAcks in time, or failed: their grabs that would have told an order were answered REPLICATION_TIMEOUT.",
		}),
		background: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_seckill_background_errors_total",
			Help: "Errors of the consumer's background work (listing vouchers, unregistering finished ones, forgetting gone consumers: retried on a later pass; releasing the buyer of a failed borrowed order: logged, the buyer stays until the sale's keys go; announcing new orders to the consumers of other processes: the sweep finds them later).",
		}, []string{"op"}),
	}
	m.gangs.WithLabelValues("committed")
	m.gangs.WithLabelValues("split")
	for _, op := range backgroundOps {
		m.background.WithLabelValues(op)
	}
	// Every outcome has its series from the start, so that the rate of a rare one (not_ready)
	// exists before it first happens.
	for _, o := range outcomeNames() {
		m.grabs.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.grabs, m.persisted, m.dead, m.claimed, m.batches, m.gangs, m.rehomed, m.superseded, m.lost, m.toldLost, m.unacked, m.background)
	}
	return m
}

// outcomeNames are every label outcome() gives: the script's outcomes, the refusals decided
// before it, and "error".
func outcomeNames() []string {
	names := []string{ErrRateLimited.Reason(), ErrNoSuchVoucher.Reason(), ErrReplicationTimeout.Reason(), outcome(errors.New("failure"))}
	for _, o := range lua.GrabOutcomes() {
		names = append(names, o.String())
	}
	return names
}

// What background work can fail, the op label of surge_seckill_background_errors_total.
const (
	opListVouchers   = "list_vouchers"
	opUnregister     = "unregister_voucher"
	opListConsumers  = "list_consumers"
	opForgetConsumer = "forget_consumer"
	// the buyer record of a failed order that had borrowed its unit (settle.go)
	opReleaseBorrower = "release_borrower"
	// a message telling the consumers of other processes about new orders (announce.go)
	opAnnounce = "announce"
)

var backgroundOps = []string{opListVouchers, opUnregister, opListConsumers, opForgetConsumer, opReleaseBorrower, opAnnounce}

func (m *metrics) grab(outcome string) { m.grabs.WithLabelValues(outcome).Inc() }
