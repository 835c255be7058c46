package idgen_test

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/redisfailover"
)

// The examples keep every key under "example:" (WithNamespace); a day's counter expires a day
// after the day ends. Redis at REDIS_ADDR, else localhost:6379.

// Plain mode: one Redis round trip per id.
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()

	orders, err := idgen.New(rdb, "order", idgen.WithNamespace("example"))
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
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()

	tickets, err := idgen.NewSegment(rdb, "ticket", idgen.WithNamespace("example"))
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
	orders, err := idgen.NewSegment(rdb, "order", idgen.WithNamespace("example"))
	if err != nil {
		panic(err)
	}
	defer orders.Close()
	_, _ = orders.Next(ctx)
}
