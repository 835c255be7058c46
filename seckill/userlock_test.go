package seckill_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// userKeyMargin is how long past the per-user lock's lease one of its keys may live: the lock
// package keeps a fence counter a little beyond the lease.
const userKeyMargin = time.Minute

// TestSyncGrabLeavesNoLastingUserKey: the synchronous strategy locks each buyer. No key of
// that lock may outlive its use: each one must be gone after the grab, or expire within the
// lock's lease and a margin. (A fence counter with no TTL per buyer, forever, is what the
// lock package used to leave: 27 000 keys after a few load runs.)
func TestSyncGrabLeavesNoLastingUserKey(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	ctx := context.Background()
	s := e.service(seckill.Options{Strategy: seckill.StrategySync})
	v := e.voucher(2)
	users := e.users(3)
	pattern := seckill.UserLockKeyPattern(e.prefix)
	t.Cleanup(func() { // whatever the outcome, nothing of this test stays in the shared Redis
		keys, _ := rdb.Keys(context.Background(), pattern).Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	for _, u := range users {
		if _, err := s.Grab(ctx, u, v); err != nil && err != seckill.ErrSoldOut {
			t.Fatal(err)
		}
	}
	keys, err := rdb.Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		switch {
		case err != nil:
			t.Fatal(err)
		case ttl == -1:
			t.Errorf("%s has no TTL: one key per buyer, forever", k)
		case ttl > seckill.UserLockLease+userKeyMargin:
			t.Errorf("%s lives %v more, beyond the lease (%v) and a margin", k, ttl, seckill.UserLockLease)
		}
	}
	t.Logf("%d per-user lock keys left after %d grabs: %v", len(keys), len(users), keys)
}
