package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

// BenchmarkL1Hit: a read answered by the in-process L1.
func BenchmarkL1Hit(b *testing.B) {
	ctx := context.Background()
	c, err := cache.New[benchPayload](ctx, testenv.Redis(b), cache.Options{Name: uniqueName("benchl1"), Local: &cache.LocalOptions{Size: 10, TTL: time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	_ = c.Set(ctx, "k", benchPayload{ID: 1})
	defer c.Delete(ctx, "k")
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, _ = c.Get(ctx, "k") // until the Set's own event has passed and L1 keeps the copy
	}
	b.ResetTimer()
	for range b.N {
		if _, err := c.Get(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}
