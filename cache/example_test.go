package cache_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/redisfailover"
)

// The examples keep every key under "example:" (Options.Prefix, FilterPrefix) and delete what
// has no TTL, so they can run against any Redis: REDIS_ADDR, else localhost:6379.

type Shop struct {
	ID   string
	Name string
}

// A stand-in for the database.
var shopsTable = map[string]Shop{"1": {"1", "Tea House"}, "2": {"2", "Hot Pot"}}

func loadShop(_ context.Context, id string) (Shop, error) {
	s, ok := shopsTable[id]
	if !ok {
		return Shop{}, cache.ErrNotFound // cached as an absence
	}
	return s, nil
}

// Cache-aside in mutex mode with the penetration defences: absences are cached and a Redis
// Bloom filter turns away ids that never existed.
func ExampleCache_GetOrLoad() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()

	// Every id that exists goes into a Bloom filter shared through Redis.
	filter, err := cache.NewRedisFilter(rdb, "shop", 10_000, 0.01, cache.FilterPrefix("example:bloom"))
	if err != nil {
		panic(err)
	}
	if _, err := filter.Rebuild(ctx, slices.Values([]string{"1", "2"})); err != nil { // e.g. all ids at startup
		panic(err)
	}
	defer rdb.Del(ctx, filter.Key(), filter.Key()+":meta") // a filter has no TTL

	shops, err := cache.New[Shop](ctx, rdb, cache.Options{Prefix: "example:cache", Name: "shop", TTL: time.Minute, Filter: filter})
	if err != nil {
		panic(err)
	}
	defer shops.Close()
	defer shops.Delete(ctx, "1")

	s, err := shops.GetOrLoad(ctx, "1", loadShop) // a miss: one load across all processes
	fmt.Println(s.Name, err)
	_, err = shops.GetOrLoad(ctx, "404", loadShop) // the filter answers: no such id
	fmt.Println(errors.Is(err, cache.ErrNotFound))
	// Output:
	// Tea House <nil>
	// true
}

// Logical expiry: the value stays in Redis; once stale it is served at once while one
// background rebuild refreshes it.
func ExampleModeLogical() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()
	types, _ := cache.New[[]string](ctx, rdb, cache.Options{Prefix: "example:cache", Name: "types", Mode: cache.ModeLogical, TTL: 50 * time.Millisecond})
	defer types.Close()
	defer types.Delete(ctx, "all") // a logical value never expires in Redis

	version := 0
	load := func(context.Context, string) ([]string, error) {
		version++
		return []string{fmt.Sprint("v", version)}, nil
	}
	v, _ := types.GetOrLoad(ctx, "all", load) // cold: loads synchronously
	fmt.Println(v)
	time.Sleep(80 * time.Millisecond)
	v, _ = types.GetOrLoad(ctx, "all", load) // stale: served at once, rebuild queued
	fmt.Println(v)
	for deadline := time.Now().Add(2 * time.Second); v[0] != "v2" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // the rebuild lands shortly
		v, _ = types.Get(ctx, "all")
	}
	fmt.Println(v)
	// Output:
	// [v1]
	// [v1]
	// [v2]
}

// Delete-after-write that survives a crash between the database write and the delete.
func ExampleCache_Invalidate() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()
	shops, _ := cache.New[Shop](ctx, rdb, cache.Options{Prefix: "example:cache", Name: "shop", TTL: time.Minute})
	defer shops.Close()
	defer shops.Delete(ctx, "2")
	defer rdb.Del(ctx, "example:cache:shop:intents") // the stream of intents outlives its entries

	// In one process per deployment (or several): deletes what a crash left undone.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go shops.RunInvalidator(runCtx, cache.InvalidatorOptions{})

	s, _ := shops.GetOrLoad(ctx, "2", loadShop)
	fmt.Println(s.Name)
	_ = shops.Invalidate(ctx, "2", func(ctx context.Context) error {
		shopsTable["2"] = Shop{"2", "Hot Pot Deluxe"} // UPDATE … in a real service
		return nil
	})
	s, _ = shops.GetOrLoad(ctx, "2", loadShop)
	fmt.Println(s.Name)
	// Output:
	// Hot Pot
	// Hot Pot Deluxe
}

// The create path: a new row's id goes into the Bloom filter before the insert, and any
// cached absence of it (here, a read made before it existed) goes after it, in every process.
func ExampleCache_Invalidate_create() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()
	filter, _ := cache.NewLocalFilter(10_000, 0.01)
	_, _ = filter.Rebuild(ctx, slices.Values([]string{"1", "2"}))
	shops, _ := cache.New[Shop](ctx, rdb, cache.Options{Prefix: "example:cache", Name: "shop", TTL: time.Minute, Filter: filter})
	defer shops.Close()
	defer shops.Delete(ctx, "3")
	defer rdb.Del(ctx, "example:cache:shop:intents")

	_, err := shops.GetOrLoad(ctx, "3", loadShop)
	fmt.Println(errors.Is(err, cache.ErrNotFound))
	err = shops.Invalidate(ctx, "3", func(ctx context.Context) error {
		shopsTable["3"] = Shop{"3", "Noodle Bar"} // INSERT … in a real service
		return nil
	}, cache.Created)
	if errors.Is(err, cache.ErrInvalidationPending) {
		err = nil // committed; the cache finishes the invalidation once Redis answers
	}
	s, _ := shops.GetOrLoad(ctx, "3", loadShop)
	fmt.Println(s.Name, err)
	// Output:
	// true
	// Noodle Bar <nil>
}

// An in-process L1 in front of Redis, dropped in every process when any process writes.
func ExampleLocalOptions() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()
	shops, _ := cache.New[Shop](ctx, rdb, cache.Options{
		Prefix: "example:cache",
		Name:   "shop",
		TTL:    time.Minute,
		Local:  &cache.LocalOptions{Size: 10_000, TTL: 5 * time.Second},
	})
	defer shops.Close()
	defer shops.Delete(ctx, "1")
	s, _ := shops.GetOrLoad(ctx, "1", loadShop)
	fmt.Println(s.Name)
	// Output: Tea House
}

// A cache on a Redis that fails over: redisfailover.NewClient builds the client, for a master
// watched by Sentinel (here) or a Cluster with replicas (Addrs: the seed nodes, no MasterName),
// and follows a promotion within about a second (its package documentation says how). Cached
// values, leases and the invalidation events go to the new master; an L1 copy is dropped when
// the event subscription comes back, as after any reconnection.
func Example_failover() {
	ctx := context.Background()
	rdb := redisfailover.NewClient(&redis.UniversalOptions{
		MasterName:            "mymaster",
		Addrs:                 []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"}, // the Sentinels
		ContextTimeoutEnabled: true,                                                           // calls end at their ctx's deadline
	})
	defer rdb.Close()
	shops, err := cache.New[Shop](ctx, rdb, cache.Options{Prefix: "example:cache", Name: "shop", Local: &cache.LocalOptions{Size: 10_000}})
	if err != nil {
		panic(err)
	}
	defer shops.Close()
	_, _ = shops.GetOrLoad(ctx, "1", loadShop)
}
