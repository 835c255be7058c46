package seckill_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// gauge reads the one series of a gauge, and whether the registry reported it.
func gauge(t *testing.T, reg *prometheus.Registry, name string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// The consumers' lag is visible to operators: surge_seckill_stream_backlog counts the
// admitted orders the database does not have yet, surge_seckill_stream_oldest_age_seconds
// how long the oldest of them has waited; both are 0 once the consumer has drained the
// stream. Every grab outcome has its series from the start, so that the rate of a rare one
// (not_ready) exists before it first happens.
func TestBacklogMetrics(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		e := newEnv(t, rdb)
		reg := prometheus.NewRegistry()
		s := e.service(seckill.Options{Registerer: reg})
		for _, outcome := range []string{"admitted", "sold_out", "not_ready", "rate_limited", "error"} {
			if !hasSeries(t, reg, "surge_seckill_grabs_total", "outcome", outcome) {
				t.Errorf("no surge_seckill_grabs_total{outcome=%q} series before any grab", outcome)
			}
		}
		if n, ok := gauge(t, reg, "surge_seckill_stream_backlog"); !ok || n != 0 {
			t.Fatalf("backlog before any sale: %v (reported: %v), want 0", n, ok)
		}

		v := e.onSale(s, 10)
		for _, u := range e.users(4) {
			if _, err := s.Grab(ctx, u, v); err != nil {
				t.Fatal(err)
			}
		}
		const waited = 300 * time.Millisecond
		time.Sleep(waited)
		if n, _ := gauge(t, reg, "surge_seckill_stream_backlog"); n != 4 {
			t.Errorf("backlog %v with 4 orders admitted and no consumer, want 4", n)
		}
		if age, _ := gauge(t, reg, "surge_seckill_stream_oldest_age_seconds"); age < waited.Seconds() || age > 60 {
			t.Errorf("oldest order's age %vs, want at least %v", age, waited)
		}

		e.consume(s)
		e.drained(v, 10*time.Second)
		n, _ := gauge(t, reg, "surge_seckill_stream_backlog")
		age, _ := gauge(t, reg, "surge_seckill_stream_oldest_age_seconds")
		if n != 0 || age != 0 {
			t.Errorf("after the drain: backlog %v, oldest age %v; want 0 and 0", n, age)
		}
	})
}

func hasSeries(t *testing.T, reg *prometheus.Registry, name, label, value string) bool {
	return series(t, reg, name, label, value) != nil
}

// series is the metric of family name with label=value in reg, nil if there is none.
func series(t *testing.T, reg *prometheus.Registry, name, label, value string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m
				}
			}
		}
	}
	return nil
}
