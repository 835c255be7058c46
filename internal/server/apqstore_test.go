package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

func TestAPQStore(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		prefix := "apq-test-" + testenv.Phone()
		s := NewAPQStore(rdb, APQOptions{Prefix: prefix, TTL: time.Minute, MaxBytes: 64})
		doc, big := "{ shopTypes { id } }", "{ "+strings.Repeat("__typename ", 10)+"}"
		t.Cleanup(func() { rdb.Del(context.Background(), s.key(sha256Hex(doc)), s.key(sha256Hex(big))) })

		if _, ok, err := s.Get(ctx, sha256Hex(doc)); ok || err != nil {
			t.Fatalf("Get before Put: %v %v", ok, err)
		}
		if err := s.Put(ctx, sha256Hex(doc), doc); err != nil {
			t.Fatal(err)
		}
		// A hit in Redis (on another server: this one remembers what it stored) renews the TTL.
		other := NewAPQStore(rdb, APQOptions{Prefix: prefix, TTL: time.Minute, MaxBytes: 64})
		rdb.Expire(ctx, s.key(sha256Hex(doc)), time.Second)
		if got, ok, err := other.Get(ctx, sha256Hex(doc)); got != doc || !ok || err != nil {
			t.Fatalf("Get: %q %v %v", got, ok, err)
		}
		if ttl := rdb.TTL(ctx, s.key(sha256Hex(doc))).Val(); ttl <= 50*time.Second {
			t.Errorf("TTL after a hit: %v, want about a minute", ttl)
		}
		// Within renewEvery (TTL/24) a server answers what it stored or found from memory,
		// with no Redis call: gone from Redis, the document still comes back, unchanged
		// (a hash names one document forever).
		rdb.Del(ctx, s.key(sha256Hex(doc)))
		for name, store := range map[string]*APQStore{"stored": s, "found": other} {
			if got, ok, err := store.Get(ctx, sha256Hex(doc)); got != doc || !ok || err != nil {
				t.Errorf("Get from memory (%s): %q %v %v", name, got, ok, err)
			}
		}
		if _, ok, _ := NewAPQStore(rdb, APQOptions{Prefix: prefix}).Get(ctx, sha256Hex(doc)); ok {
			t.Error("a server that never saw the document found it in Redis after its deletion")
		}
		// Over MaxBytes: not stored.
		if err := s.Put(ctx, sha256Hex(big), big); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.Get(ctx, sha256Hex(big)); ok {
			t.Errorf("a document of %d bytes stored with MaxBytes 64", len(big))
		}
	})
}

// On a frozen Redis, with go-redis's default client (deadlines ignored), a lookup is a miss and
// a store is skipped within Timeout: the request goes on (the client sends its query in full).
func TestAPQStoreOnFrozenRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	s := NewAPQStore(rdb, APQOptions{Prefix: "apq-frozen", Timeout: 200 * time.Millisecond})
	if err := s.Put(context.Background(), "h", "{ a }"); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	for name, call := range map[string]func() error{
		"Get": func() error { _, _, err := s.Get(context.Background(), "h-unseen"); return err },
		"Put": func() error { return s.Put(context.Background(), "h2", "{ b }") },
	} {
		start := time.Now()
		err := call()
		if took := time.Since(start); err == nil || took > 400*time.Millisecond {
			t.Errorf("%s on a frozen Redis: %v after %v; want an error within the 200 ms timeout", name, err, took)
		}
	}
}
