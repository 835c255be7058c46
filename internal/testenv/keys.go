package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cleanupTimeout bounds the deletion of a test's keys.
const cleanupTimeout = 10 * time.Second

// CleanupKeys deletes the keys matching pattern (e.g. "<namespace>:*") when the test ends,
// failed or not, on every master of a Cluster. rdb must still be open then: call it after
// creating the client, so that the client's own cleanup runs later.
func CleanupKeys(t testing.TB, rdb redis.UniversalClient, pattern string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		del := func(ctx context.Context, node *redis.Client) error {
			it := node.Scan(ctx, 0, pattern, 1000).Iterator()
			for it.Next(ctx) {
				node.Unlink(ctx, it.Val())
			}
			return it.Err()
		}
		var err error
		switch c := rdb.(type) {
		case *redis.ClusterClient:
			err = c.ForEachMaster(ctx, del)
		case *redis.Client:
			err = del(ctx, c)
		}
		if err != nil {
			t.Logf("testenv: deleting %s: %v", pattern, err)
		}
	})
}
