package lock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

func keysLeft(t *testing.T, rdb redis.UniversalClient, c *lock.Client, names []string) []string {
	t.Helper()
	var left []string
	for _, n := range names {
		if rdb.Exists(context.Background(), c.Key(n)).Val() != 0 {
			left = append(left, n)
		}
	}
	return left
}

// keysLeftAfterCleanup is keysLeft once a failed acquisition's background cancels had time
// to run: it waits up to a second for the keys left to be want.
func keysLeftAfterCleanup(t *testing.T, rdb redis.UniversalClient, c *lock.Client, names, want []string) []string {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		left := keysLeft(t, rdb, c, names)
		if slices.Equal(left, want) || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestObtainMulti(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a, b := newClient(t, rdb, lock.Options{}), newClient(t, rdb, lock.Options{})
		names := []string{uniq("m3"), uniq("m1"), uniq("m2"), uniq("m4")}
		if _, ok := rdb.(*redis.ClusterClient); ok {
			slots := map[int64]bool{}
			for _, n := range names {
				slots[rdb.ClusterKeySlot(ctx, a.Key(n)).Val()] = true
			}
			if len(slots) < 2 {
				t.Skip("names landed in one slot")
			}
		}

		// All free: one lock over all names, one fence each.
		l, err := a.ObtainMulti(ctx, names, lock.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(l.Names()) || len(l.Names()) != 4 || len(l.Fences()) != 4 {
			t.Fatalf("names %v fences %v", l.Names(), l.Fences())
		}
		if left := keysLeft(t, rdb, a, names); len(left) != 4 {
			t.Fatalf("held keys: %v", left)
		}
		// Each name is held: single locks and overlapping multi-locks are refused.
		if _, err := b.Obtain(ctx, names[2], lock.LockOptions{}); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("single lock of a multi-locked name: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if left := keysLeft(t, rdb, a, names); len(left) != 0 {
			t.Fatalf("keys left after Release: %v", left)
		}

		// Partial failure: the last name in sorted order is held by someone else. The fast path
		// and then the ordered path take the others, wait, give up, and release all of them.
		sorted := slices.Sorted(slices.Values(names))
		blocker, err := b.Obtain(ctx, sorted[3], lock.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := a.ObtainMulti(ctx, names, lock.LockOptions{Wait: 200 * time.Millisecond}); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("ObtainMulti with one name held: %v", err)
		}
		if el := time.Since(start); el < 200*time.Millisecond {
			t.Fatalf("gave up after %v, before the wait", el)
		}
		if left := keysLeftAfterCleanup(t, rdb, a, names, sorted[3:]); !slices.Equal(left, sorted[3:]) {
			t.Fatalf("keys after a failed multi-lock: %v, want only the blocker's %s", left, sorted[3])
		}
		// Cancelling ctx part way releases too.
		cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		_, err = a.ObtainMulti(cctx, names, lock.LockOptions{Wait: -1})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ObtainMulti with ctx ending: %v", err)
		}
		if left := keysLeftAfterCleanup(t, rdb, a, names, sorted[3:]); !slices.Equal(left, sorted[3:]) {
			t.Fatalf("keys after a cancelled multi-lock: %v", left)
		}

		// Released while waiting: obtained.
		go func() {
			time.Sleep(100 * time.Millisecond)
			_ = blocker.Release(ctx)
		}()
		l, err = a.ObtainMulti(ctx, names, lock.LockOptions{Wait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if l.Fences()[3] <= blocker.Fence() {
			t.Fatalf("fence %d after the blocker's %d", l.Fences()[3], blocker.Fence())
		}
		// Losing one name loses the lock.
		rdb.Del(ctx, a.Key(sorted[1]))
		if err := l.Extend(ctx, time.Minute); !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("Extend with a name lost: %v", err)
		}
		if err := l.Release(ctx); !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("Release with a name lost: %v", err)
		}
		if left := keysLeft(t, rdb, a, names); len(left) != 0 {
			t.Fatalf("keys left: %v", left)
		}
	})
}

// Two multi-locks over overlapping names taken in opposite orders by many goroutines: no
// deadlock, no overlap.
func TestObtainMultiNoDeadlock(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		x, y, z := uniq("x"), uniq("y"), uniq("z")
		sets := [][]string{{x, y}, {y, z}, {z, x}, {z, y, x}}
		inside := map[string]int{}
		var mu = make(chan struct{}, 1)
		errc := make(chan error, 16)
		for i := range 8 {
			c := newClient(t, rdb, lock.Options{})
			go func() {
				for n := 0; n < 15; n++ {
					set := sets[(i+n)%len(sets)]
					l, err := c.ObtainMulti(ctx, set, lock.LockOptions{Wait: -1})
					if err != nil {
						errc <- err
						return
					}
					mu <- struct{}{}
					for _, s := range set {
						if inside[s]++; inside[s] > 1 {
							<-mu
							errc <- errors.New("two holders of " + s)
							return
						}
					}
					<-mu
					time.Sleep(time.Millisecond)
					mu <- struct{}{}
					for _, s := range set {
						inside[s]--
					}
					<-mu
					if err := l.Release(ctx); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
		}
		for range 8 {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
	})
}
