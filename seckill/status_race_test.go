package seckill_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestOrderFoundWhilePersisted reads orders over and over while the consumer moves them from
// the stream to the database: Order must never answer "no such order" in between (it did when
// an order left the stream after Order's database read and before its stream read).
func TestOrderFoundWhilePersisted(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	ctx := context.Background()
	const n = 60
	users := e.users(n)
	s := e.service(seckill.Options{})
	v := e.onSale(s, n)
	orders := make([]int64, n)
	for i, u := range users {
		a, err := s.Grab(ctx, u, v)
		if err != nil {
			t.Fatal(err)
		}
		orders[i] = a.OrderID
	}
	e.consume(e.service(seckill.Options{}))
	var wg sync.WaitGroup
	for i := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				o, err := s.Order(ctx, users[i], orders[i])
				switch {
				case err != nil:
					t.Errorf("order %d: %v", i, err)
					return
				case o == nil:
					t.Errorf("order %d: reported missing while being persisted", i)
					return
				case o.Status == "CREATED":
					return
				}
			}
			t.Errorf("order %d never CREATED", i)
		}()
	}
	wg.Wait()
}
