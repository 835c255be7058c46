package lock

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"

	"github.com/surgekit/surge/internal/testenv"
)

// TestCancelOvertakesAcquire: the cancel of an abandoned acquisition can reach Redis before
// the acquisition itself (both stuck in a hung Redis's input buffers, run in any order once it
// resumes). The acquisition must then fail instead of taking the lock for nobody.
func TestCancelOvertakesAcquire(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := New(rdb, Options{})
		defer c.Close()
		const lease = 10 * time.Second
		k := c.keysOf("test:overtaken:" + rand.Text()[:12])
		defer rdb.Del(ctx, k.fence)

		token := rand.Text()
		if _, err := releaseToken(ctx, rdb, k, token, true); err != nil {
			t.Fatal(err)
		}
		g, err := c.obtainToken(ctx, k, token, lease)
		if err != nil || g.Taken {
			t.Fatalf("simple acquisition after its cancel: %+v, %v; want not taken", g, err)
		}
		if ttl := rdb.PTTL(ctx, k.tombstone(token)).Val(); ttl <= 0 || ttl > tombstoneTTL {
			t.Fatalf("tombstone PTTL %v, want at most %v", ttl, tombstoneTTL)
		}

		holdID := rand.Text()
		if _, err := releaseHold(ctx, rdb, k, holdID, true); err != nil {
			t.Fatal(err)
		}
		g, err = c.obtainHold(ctx, k, "owner", holdID, lease)
		if err != nil || g.Taken {
			t.Fatalf("reentrant acquisition after its cancel: %+v, %v; want not taken", g, err)
		}
		if n := rdb.Exists(ctx, k.lock).Val(); n != 0 {
			t.Fatal("a cancelled acquisition took the lock")
		}

		// In the usual order the cancel gives back exactly the hold it names.
		other, mine := rand.Text(), rand.Text()
		for _, id := range []string{other, mine} {
			if g, err := c.obtainHold(ctx, k, "owner", id, lease); err != nil || !g.Taken {
				t.Fatalf("hold %s: %+v, %v", id, g, err)
			}
		}
		if _, err := releaseHold(ctx, rdb, k, mine, true); err != nil {
			t.Fatal(err)
		}
		fields := rdb.HGetAll(ctx, k.lock).Val()
		if countHolds(fields, "owner") != 1 || fields[other] == "" {
			t.Fatalf("after cancelling one of two holds: %v", fields)
		}
		if r, err := releaseHold(ctx, rdb, k, other, false); err != nil || r != (lua.HoldRelease{Found: true}) {
			t.Fatalf("last hold's release: %+v, %v", r, err)
		}
		rdb.Del(ctx, k.tombstone(token), k.tombstone(holdID))
	})
}
