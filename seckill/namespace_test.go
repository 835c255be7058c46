package seckill_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// With Options.Namespace every key the service writes (sale state, registry, the voucher and
// per-user locks with their fences, the order id counter) starts with "<ns>:", so two
// deployments can share a Redis: checked on a private Redis, where any other key would show.
func TestNamespaceCoversEveryKey(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	e := newEnv(t, rdb)
	ctx := context.Background()
	ns := "deploy-" + testenv.Phone()
	open := func(strategy seckill.Strategy) *seckill.Service {
		o := e.options(seckill.Options{Strategy: strategy})
		o.Prefix, o.Namespace = "", ns // the default prefix, under the namespace
		s, err := seckill.New(e.db.Ent, rdb, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	lua := open(seckill.StrategyLua)
	v := e.voucher(10)
	if err := lua.Warm(ctx, v); err != nil {
		t.Fatal(err)
	}
	users := e.users(3)
	for _, u := range users[:2] {
		if _, err := lua.Grab(ctx, u, v); err != nil {
			t.Fatal(err)
		}
	}
	e.consume(lua)
	k := seckill.KeysOf(ns+":seckill", v)
	waitFor(t, 10*time.Second, func() bool { return rdb.XLen(ctx, k.Orders).Val() == 0 })
	if err := lua.Rebuild(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, err := open(seckill.StrategySync).Grab(ctx, users[2], e.voucher(1)); err != nil {
		t.Fatal(err)
	}

	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if !strings.HasPrefix(key, ns+":") {
			t.Errorf("key %q is outside the namespace %s", key, ns)
		}
	}
	vs := strconv.Itoa(v)
	for _, want := range []string{k.Meta, k.Stock, k.Buyers, ns + ":seckill:vouchers",
		ns + ":lock:{seckill:" + vs + "}:fence", ns + ":lock:{seckill-user:" + strconv.Itoa(users[2]) + "}:fence"} {
		if rdb.Exists(ctx, want).Val() != 1 {
			t.Errorf("no key %s among %v", want, keys)
		}
	}
	if ids, _ := rdb.Keys(ctx, ns+":id:order:*").Result(); len(ids) != 1 {
		t.Errorf("order id counters %v, want one under %s:id:order:", ids, ns)
	}
}

func TestNamespaceValidated(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	for _, ns := range []string{"a{b", "b}", "a b", ":a", "a:"} {
		o := e.options(seckill.Options{Namespace: ns})
		if _, err := seckill.New(e.db.Ent, e.rdb, o); err == nil {
			t.Errorf("namespace %q accepted", ns)
		}
	}
}

// waitFor polls cond every 20 ms until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("condition not met in time"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
