package idgen_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/redisfailover"
)

// Plain mode: one Redis round trip per id.
func ExampleNew() {
	ctx := context.Background()
	// Redis at $SURGE_TEST_REDIS_ADDR (the test suite's), else on this machine.
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("SURGE_TEST_REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	defer rdb.Del(ctx, "id:example-order:"+time.Now().UTC().Format("20060102"))

	orders, err := idgen.New(rdb, "example-order")
	if err != nil {
		panic(err)
	}
	defer orders.Close()
	a, _ := orders.Next(ctx)
	b, _ := orders.Next(ctx)
	fmt.Println(a > 1<<48, b > a)
	// Output: true true
}

// Segment mode: blocks of numbers reserved in Redis, ids handed out locally.
func ExampleNewSegment() {
	ctx := context.Background()
	// Redis at $SURGE_TEST_REDIS_ADDR (the test suite's), else on this machine.
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("SURGE_TEST_REDIS_ADDR"), "127.0.0.1:6379")})
	defer rdb.Close()
	defer rdb.Del(ctx, "id:example-ticket:"+time.Now().UTC().Format("20060102"))

	tickets, err := idgen.NewSegment(rdb, "example-ticket")
	if err != nil {
		panic(err)
	}
	defer tickets.Close() // stops the background fetch

	prev := int64(0)
	for range 10_000 { // one INCRBY per block, not per id
		id, err := tickets.Next(ctx)
		if err != nil || id <= prev {
			panic(err)
		}
		prev = id
	}
	fmt.Println("10000 increasing ids")
	// Output: 10000 increasing ids
}

func ExampleDecompose() {
	t, seq := idgen.Decompose(660355070050697258)
	fmt.Println(t, seq)
	// Output: 2026-11-15 12:34:56 +0000 UTC 42
}

// Ids on a Redis that fails over: redisfailover.NewClient builds the client, for a master
// watched by Sentinel (here) or a Cluster with replicas, and follows a promotion within about a
// second. A promotion can lose counts the replica had not received: WithEpochStore keeps ids
// unique through that (see the package documentation).
func Example_failover() {
	ctx := context.Background()
	rdb := redisfailover.NewClient(&redis.UniversalOptions{
		MasterName:            "mymaster",
		Addrs:                 []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"},
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
	orders, err := idgen.NewSegment(rdb, "order")
	if err != nil {
		panic(err)
	}
	defer orders.Close()
	_, _ = orders.Next(ctx)
}
