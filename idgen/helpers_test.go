package idgen_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
)

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

// The close test stops a private Redis on purpose; keep go-redis's dial log out of the output.
func init() { redis.SetLogger(quietLog{}) }

// long reports whether the bigger sizes were asked for (IDGEN_LONG=1).
func long() bool { return os.Getenv("IDGEN_LONG") != "" }

// newPrefix returns a prefix no other test (or run) uses, and deletes its keys when the test
// ends.
func newPrefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	p := "test-" + hex.EncodeToString(b)
	t.Cleanup(func() { deleteKeys(rdb, "id:"+p+":*") })
	return p
}

// deleteKeys removes the keys matching pattern, on every master of a Cluster.
func deleteKeys(rdb redis.UniversalClient, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del := func(ctx context.Context, c redis.UniversalClient) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			c.Del(ctx, it.Val())
		}
		return it.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return del(ctx, node) })
		return
	}
	_ = del(ctx, rdb)
}

func dayKey(prefix string, t time.Time) string {
	return "id:" + prefix + ":" + t.UTC().Format("20060102")
}

// nextMidnight is the coming UTC midnight: a day boundary tests can cross with an injected
// clock and still be inside the retention by Redis's clock. Within a minute of it, the one
// after: a counter's fence (Redis's clock plus some seconds) must stay before the test's times.
func nextMidnight() time.Time {
	m := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	if time.Until(m) < time.Minute {
		m = m.Add(24 * time.Hour)
	}
	return m
}

// counter reads the last number reserved on a day key.
func counter(ctx context.Context, rdb redis.UniversalClient, key string) (int64, error) {
	return rdb.HGet(ctx, key, "n").Int64()
}

// setCounter presets a day key's counter (as another process's counting would have left it).
func setCounter(ctx context.Context, rdb redis.UniversalClient, key string, n int64) error {
	if err := rdb.HSet(ctx, key, "n", n).Err(); err != nil {
		return err
	}
	return rdb.Expire(ctx, key, 72*time.Hour).Err()
}

// clock is an injectable clock. Each reading advances it by step (0: it stands still until
// Set), so a long run of ids can walk across midnight.
type clock struct {
	ns   atomic.Int64
	step int64
}

func newClock(t time.Time, step time.Duration) *clock {
	c := &clock{step: int64(step)}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Add(c.step)).UTC() }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// backend is a way to open independent clients (one per simulated process) to one kind of
// Redis.
type backend struct {
	name string
	open func(testing.TB) redis.UniversalClient
}

var backends = []backend{{"single", testenv.Redis}, {"cluster", testenv.Cluster}}

// eachBackend runs fn on a single node and on the 3-master Cluster, with a function that opens
// a new client each time it is called.
func eachBackend(t *testing.T, fn func(t *testing.T, open func(testing.TB) redis.UniversalClient)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open) })
	}
}

// modes are the two constructors, for tests that hold for both.
var modes = []struct {
	name string
	new  func(redis.UniversalClient, string, ...idgen.Option) (*idgen.Generator, error)
}{{"plain", idgen.New}, {"segment", idgen.NewSegment}}
