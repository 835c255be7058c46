package seckill_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestRestartSeenWhileListingFails: the consumer notices a Redis restart or failover (the
// run_id changed; at its start, the first run_id it reads) in the same pass in which listing
// the live vouchers fails, as right after a promotion (CLUSTERDOWN). It used to check the
// vouchers listed in that pass, none, and never again: a voucher whose state the promoted
// replica held from before was not rebuilt, and the orders told before the failover and lost
// with the old master were never recorded LOST (TestFailoverMidSale, lagging replica, under
// load: 23 told orders answered nothing). It checks them once a listing succeeds.
func TestRestartSeenWhileListingFails(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	s := e.service(seckill.Options{})
	v := e.onSale(s, 10)
	ctx := context.Background()
	k := seckill.KeysOf(e.prefix, v)
	// The state as a restarted Redis would hold it: rebuilt under another run_id.
	if err := rdb.HSet(ctx, k.Meta, "run", "0123456789abcdef").Err(); err != nil {
		t.Fatal(err)
	}
	// The first listing fails: the registry is not a sorted set for a moment.
	registry := seckill.RegistryKey(e.prefix)
	members, err := rdb.ZRangeWithScores(ctx, registry, 0, -1).Result()
	if err != nil || len(members) == 0 {
		t.Fatalf("registry %v, %v", members, err)
	}
	rdb.Del(ctx, registry)
	rdb.Set(ctx, registry, "not a sorted set", time.Minute)
	e.consume(s)
	time.Sleep(300 * time.Millisecond) // the consumer's first pass: run_id read, listing failed
	rdb.Del(ctx, registry)
	rdb.ZAdd(ctx, registry, members...)

	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	runID := regexp.MustCompile(`run_id:([0-9a-f]+)`).FindStringSubmatch(info)
	if runID == nil {
		t.Skip("this Redis reports no run_id")
	}
	e.waitFor("the stale voucher rebuilt", 10*time.Second, func() bool {
		return rdb.HGet(ctx, k.Meta, "run").Val() == runID[1]
	})
}
