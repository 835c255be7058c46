package cache_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

// FilterPrefix moves every key of a filter under <prefix>:{<name>} (a deployment's namespace),
// on a single node and on the Cluster (the rebuild's RENAME needs one slot); the default stays
// bloom:{<name>}, and two prefixes are two filters.
func TestRedisFilterPrefix(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		name := randName(t)
		prefix := "ns-" + name + ":bloom"
		f, err := cache.NewRedisFilter(rdb, name, 1000, 0.01, cache.FilterPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		cleanupFilter(t, rdb, f.Key())
		if want := prefix + ":{" + name + "}"; f.Key() != want {
			t.Fatalf("Key() = %q, want %q", f.Key(), want)
		}
		rebuild(t, f, ids("a", 100))
		if n := rdb.Exists(ctx, f.Key(), f.Key()+":meta").Val(); n != 2 {
			t.Fatalf("%d of the filter's keys under %s, want 2", n, prefix)
		}
		requireAll(t, f, ids("a", 100))
		plain := newRedisFilter(t, rdb, 1000, 0.01)
		if !strings.HasPrefix(plain.Key(), "bloom:{") {
			t.Fatalf("default key %q", plain.Key())
		}
		other, err := cache.NewRedisFilter(rdb, name, 1000, 0.01)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Test(ctx, "a:1"); err == nil {
			t.Fatal("the filter of the default prefix answers from the prefixed one's bits")
		}
	})
}

func TestRedisFilterPrefixValidated(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, p := range []string{"", "a{b", "b}", "a b"} {
		if _, err := cache.NewRedisFilter(rdb, "x", 1000, 0.01, cache.FilterPrefix(p)); err == nil {
			t.Errorf("FilterPrefix(%q) accepted", p)
		}
	}
}
