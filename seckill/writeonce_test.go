package seckill_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestHotVoucherOrdersAreWrittenOnce: a voucher with many batches waiting is drained in turns
// of several batches, each read while the last was written; with no fault, each order is read
// and written once, not read again from the pending list (where entries wait while their
// acknowledgement is in flight) and written a second time as its own duplicate. Such rereads
// cost Redis, the database and the consumer the same work again during a surge.
func TestHotVoucherOrdersAreWrittenOnce(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		const batch, n = 10, 400 // 40 batches: ten turns of a hot voucher
		s := e.service(seckill.Options{Registerer: reg, BatchSize: batch})
		v := e.onSale(s, n)
		for _, u := range e.users(n) {
			if _, err := s.Grab(ctx, u, v); err != nil {
				t.Fatal(err)
			}
		}
		stop := e.consume(s)
		e.drained(v, 30*time.Second)
		writtenOnce(t, e, reg, v, n, stop)
	})
}

// TestSurgeOrdersAreWrittenOnce: grabs running while the consumer reads (its reads are
// shorter during a surge, BatchSize again after it): every order is written once, and the
// voucher drains after the last grab without waiting for the sweep.
func TestSurgeOrdersAreWrittenOnce(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		const n = 2000
		s := e.service(seckill.Options{Registerer: reg})
		v := e.onSale(s, n)
		users := e.users(n)
		stop := e.consume(s)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := range 32 {
			wg.Go(func() {
				for i := w; i < n; i += 32 {
					if _, err := s.Grab(ctx, users[i], v); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		e.drained(v, 5*time.Second)
		writtenOnce(t, e, reg, v, n, stop)
	})
}

// writtenOnce checks, once voucher v's stream has drained, that its n orders (its whole stock)
// are in the database and were each persisted once: it waits for the consumer's count, stops
// the consumer, and compares.
func writtenOnce(t *testing.T, e *env, reg *prometheus.Registry, v, n int, stop func()) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); counter(t, reg, "surge_seckill_orders_persisted_total") < float64(n); {
		if time.Now().After(deadline) {
			t.Fatalf("%v orders persisted after the drain, want %d", counter(t, reg, "surge_seckill_orders_persisted_total"), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if st := e.state(v); st.orders != n || st.dupUsers != 0 || st.dbStock != 0 || st.redisStock != 0 {
		t.Fatalf("state %+v, want %d orders and no stock left", st, n)
	}
	if got := counter(t, reg, "surge_seckill_orders_persisted_total"); got != float64(n) {
		t.Errorf("orders persisted %v times for %d orders: some were read back and written again", got, n)
	}
}
