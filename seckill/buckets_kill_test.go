package seckill_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestBucketConsumerSIGKILLed: a process running only the order consumer is SIGKILLed in the
// middle of a sale of a 6-bucket voucher, with entries delivered to it and not acknowledged;
// the surviving process's consumer claims them (ClaimIdle 1 s) and the sale ends exact.
func TestBucketConsumerSIGKILLed(t *testing.T) {
	rdb := testenv.Cluster(t)
	e := newEnv(t, rdb)
	const k, stock = 6, 300
	users := e.users(900)
	v := e.bucketVoucher(stock, k)
	s := e.service(seckill.Options{ClaimIdle: time.Second})
	if err := s.Warm(context.Background(), v); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBucketConsumer$", "-test.v")
	cmd.Env = append(os.Environ(), "SURGE_HELPER_CONSUMER=1", "SURGE_HELPER_DSN="+e.dsn, "SURGE_HELPER_PREFIX="+e.prefix,
		"SURGE_HELPER_CLUSTER="+strings.Join(testenv.ClusterAddrs(), ","))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	// The helper alone consumes the first part of the sale.
	tl := storm(t, []*seckill.Service{s}, users[:300], v)
	e.waitFor("the helper consumer wrote orders", 30*time.Second, func() bool { return e.state(v).orders > 0 })
	tl2 := storm(t, []*seckill.Service{s}, users[300:600], v)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	e.consume(s) // the survivor takes over, claiming what the dead one held
	tl3 := storm(t, []*seckill.Service{s}, users[600:], v)
	e.bucketsDrained(v, k, 60*time.Second)
	for _, x := range []*tally{tl2, tl3} {
		tl.admitted.Add(x.admitted.Load())
		for id, u := range x.orders {
			tl.orders[id] = u
		}
	}
	checkBuckets(t, e, s, v, k, stock, users, tl)
}

// TestHelperBucketConsumer is the process TestBucketConsumerSIGKILLed kills: it runs a
// consumer until killed. It does nothing in a normal test run.
func TestHelperBucketConsumer(t *testing.T) {
	if os.Getenv("SURGE_HELPER_CONSUMER") != "1" {
		t.Skip("helper process of TestBucketConsumerSIGKILLed")
	}
	db, err := store.OpenMySQL(os.Getenv("SURGE_HELPER_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxConns(4)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("SURGE_HELPER_CLUSTER"), ",")})
	s, err := seckill.New(db.Ent, rdb, seckill.Options{Prefix: os.Getenv("SURGE_HELPER_PREFIX"), Dialect: db.Dialect,
		EpochStore: db.Epochs(), Logger: quietLogger(), ClaimIdle: time.Second, RateLimit: seckill.RateLimit{PerSecond: -1}})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.RunConsumer(context.Background()) // until SIGKILL
}
