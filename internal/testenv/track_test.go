package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

// A test's keys get a TTL when it ends, failed or not: set directly, by a script, in a
// pipeline; a TTL the code set is kept.
func TestTrackedKeysGetATTL(t *testing.T) {
	outer := testenv.Redis(t)
	ctx := context.Background()
	p := "testenv-track-" + testenv.Phone() + ":"
	testenv.CleanupKeys(t, outer, p+"*")
	t.Run("writer", func(t *testing.T) {
		rdb := testenv.Redis(t)
		rdb.Set(ctx, p+"plain", 1, 0)
		rdb.Set(ctx, p+"own-ttl", 1, time.Hour)
		redis.NewScript(`redis.call('set', KEYS[1], 1) return 1`).Run(ctx, rdb, []string{p + "script"})
		pipe := rdb.Pipeline()
		pipe.HSet(ctx, p+"piped", "f", 1)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	})
	for _, k := range []string{"plain", "script", "piped"} {
		if ttl := outer.TTL(ctx, p+k).Val(); ttl <= 0 || ttl > testenv.LeftoverTTL {
			t.Errorf("%s: TTL %v after the test, want (0, %v]", k, ttl, testenv.LeftoverTTL)
		}
	}
	if ttl := outer.TTL(ctx, p+"own-ttl").Val(); ttl < 59*time.Minute {
		t.Errorf("own-ttl: TTL %v after the test, want the hour the code set", ttl)
	}
}
