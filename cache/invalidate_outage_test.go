package cache_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

// Redis goes away right after the database commit (hangs, or dies and restarts from its
// AOF with the old value): Invalidate says the write committed and the delete is pending (not
// a failure to retry the write), retries the delete in-process, and the stale value is gone
// soon after Redis answers again, with no invalidator running.
func TestInvalidateAfterCommitDuringOutage(t *testing.T) {
	t.Run("hung", func(t *testing.T) {
		srv := testenv.StartRedis(t)
		testInvalidateAfterCommit(t, srv, srv.Freeze, srv.Thaw)
	})
	t.Run("restarted", func(t *testing.T) {
		srv := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
		testInvalidateAfterCommit(t, srv, srv.Kill, srv.Start)
	})
}

func testInvalidateAfterCommit(t *testing.T, srv *testenv.RedisServer, breakRedis, restore func()) {
	rdb := defaultClient(t, srv.Addr)
	ctx := context.Background()
	c := newCacheOn[string](t, rdb, cache.Options{Name: uniqueName("invcommit")})
	var db atomic.Value
	db.Store("old")
	load := func(context.Context, string) (string, error) { return db.Load().(string), nil }
	if v, err := c.GetOrLoad(ctx, "k", load); err != nil || v != "old" {
		t.Fatalf("warm: %q %v", v, err)
	}
	done := make(chan error, 1)
	go func() {
		done <- c.Invalidate(ctx, "k", func(context.Context) error {
			db.Store("new") // the commit
			breakRedis()    // and Redis goes away
			return nil
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		restore()
		t.Fatal("Invalidate did not return within 5 s of Redis going away")
	}
	if !errors.Is(err, cache.ErrInvalidationPending) {
		restore()
		t.Fatalf("Invalidate after the commit: %v, want ErrInvalidationPending", err)
	}
	restore()
	back := time.Now()
	eventually(t, 5*time.Second, "the stale value deleted after Redis came back", func() bool {
		return rdb.Exists(ctx, c.Key("k")).Val() == 0
	})
	t.Logf("stale value gone %v after Redis answered again", time.Since(back).Round(time.Millisecond))
	if d := time.Since(back); d > 3*time.Second {
		t.Fatalf("stale value stayed %v after Redis came back", d)
	}
	if v, err := c.GetOrLoad(ctx, "k", load); err != nil || v != "new" {
		t.Fatalf("after recovery: %q %v", v, err)
	}
	intents := c.Key("")[:len(c.Key(""))-3] + ":intents"
	eventually(t, 5*time.Second, "no intent left", func() bool { return rdb.XLen(ctx, intents).Val() == 0 })
}

// Redis hangs before the write: the intent cannot be recorded, so by default the write does
// not run (a typed error says so, at once); with WriteUnrecorded it runs, and the delete is
// retried in-process until Redis answers.
func TestInvalidateWhenIntentCannotBeRecorded(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := defaultClient(t, srv.Addr)
	ctx := context.Background()
	c := newCacheOn[string](t, rdb, cache.Options{Name: uniqueName("invfirst")})
	var db atomic.Value
	db.Store("old")
	load := func(context.Context, string) (string, error) { return db.Load().(string), nil }
	if _, err := c.GetOrLoad(ctx, "k", load); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	wrote := false
	start := time.Now()
	err := c.Invalidate(ctx, "k", func(context.Context) error { wrote = true; return nil })
	if !errors.Is(err, cache.ErrIntentNotRecorded) || wrote {
		t.Fatalf("Invalidate with Redis hung: %v (write ran: %v), want ErrIntentNotRecorded and no write", err, wrote)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("refusing took %v", d)
	}
	err = c.Invalidate(ctx, "k", func(context.Context) error { db.Store("new"); return nil }, cache.WriteUnrecorded)
	if !errors.Is(err, cache.ErrInvalidationPending) || db.Load() != "new" {
		t.Fatalf("WriteUnrecorded: %v, want the write run and ErrInvalidationPending", err)
	}
	srv.Thaw()
	eventually(t, 5*time.Second, "the stale value deleted after Redis came back", func() bool {
		v, err := c.GetOrLoad(ctx, "k", load)
		return err == nil && v == "new"
	})
}
