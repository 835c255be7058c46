package seckill_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestLostReadReplyIsRetriedAtOnce: a read that Redis served but whose reply never reached
// the consumer (Redis restarted right after, the connection broke) leaves entries pending with
// that consumer, which never saw them. Once Redis answers again the reader writes its own
// pending entries at once, not after ClaimIdle (30 s here): a restart that loses a reply must
// not hold orders back that long (what internal/faults' TestRedisRestartAOF met under load).
func TestLostReadReplyIsRetriedAtOnce(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	ctx := context.Background()
	addr := rdb.(*redis.Client).Options().Addr
	proxy := testenv.NewProxy(t, addr)
	streams := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = streams.Close() })
	const consumer = "lost-reply"
	s := e.service(seckill.Options{Consumer: consumer, StreamClient: streams, ClaimIdle: 30 * time.Second})
	v := e.onSale(s, 10)
	for _, u := range e.users(5) {
		if _, err := s.Grab(ctx, u, v); err != nil {
			t.Fatal(err)
		}
	}
	// What the lost reply leaves: the entries delivered to the consumer behind its back.
	k := seckill.KeysOf(e.prefix, v)
	err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: consumer, Streams: []string{k.Orders, ">"}, Count: 100}).Err()
	if err != nil {
		t.Fatal(err)
	}
	e.consume(s)
	time.Sleep(300 * time.Millisecond) // the reader now blocks on its read of new entries
	proxy.Cut()                        // which fails, as when Redis restarts
	time.Sleep(200 * time.Millisecond)
	proxy.Restore(t)
	e.drained(v, 5*time.Second)
	if st := e.state(v); st.orders != 5 || st.dbStock != 5 {
		t.Fatalf("after the drain: %+v", st)
	}
}
