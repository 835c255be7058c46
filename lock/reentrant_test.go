package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

func TestReentrant(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		const depth = 10
		bg := context.Background()
		a, b := newClient(t, rdb, lock.Options{}), newClient(t, rdb, lock.Options{})
		name := uniq("reentrant")
		ra, rb := a.NewReentrant(name, lock.LockOptions{}), b.NewReentrant(name, lock.LockOptions{})
		alice, bob := lock.WithOwner(bg, "alice"), lock.WithOwner(bg, "bob")

		var held []*lock.Lock
		for i := 0; i < depth; i++ {
			l, err := ra.TryLock(alice, 0)
			if err != nil {
				t.Fatalf("depth %d: %v", i+1, err)
			}
			if i > 0 && l.Fence() != held[0].Fence() {
				t.Fatalf("nested fence %d, first %d", l.Fence(), held[0].Fence())
			}
			held = append(held, l)
		}
		if n, err := ra.HoldCount(alice); err != nil || n != depth {
			t.Fatalf("HoldCount = %d, %v; want %d", n, err, depth)
		}
		// Another owner, in another client, is refused; so is a simple lock of the name.
		if _, err := rb.TryLock(bob, 0); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("other owner: %v", err)
		}
		if _, err := b.Obtain(bg, name, lock.LockOptions{}); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("simple lock of a held reentrant name: %v", err)
		}
		// The wrong owner may neither unlock nor extend.
		if err := rb.Unlock(bob); !errors.Is(err, lock.ErrNotOwner) {
			t.Fatalf("Unlock by another owner: %v", err)
		}
		if err := rb.Extend(bob, time.Minute); !errors.Is(err, lock.ErrNotOwner) {
			t.Fatalf("Extend by another owner: %v", err)
		}
		if err := rb.Unlock(bg); !errors.Is(err, lock.ErrNotOwner) {
			t.Fatalf("Unlock without owner: %v", err)
		}
		// Several handles here: Unlock must be told which one.
		if err := ra.Unlock(alice); !errors.Is(err, lock.ErrAmbiguousUnlock) {
			t.Fatalf("Unlock with %d handles and none named: %v", depth, err)
		}
		// The owner may extend from another client too (the owner is the context's, not the
		// client's), never shortening the lease.
		if err := rb.Extend(alice, time.Minute); err != nil {
			t.Fatal(err)
		}
		if pttl := rdb.PTTL(bg, a.Key(name)).Val(); pttl < 59*time.Second {
			t.Fatalf("PTTL after owner Extend: %v", pttl)
		}

		// bob waits; he must get it only after the 10th release.
		got := make(chan *lock.Lock, 1)
		go func() {
			l, err := rb.Lock(bob)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		for i := depth - 1; i >= 0; i-- {
			time.Sleep(5 * time.Millisecond)
			select {
			case <-got:
				t.Fatalf("bob obtained the lock with %d holds of alice left", i+1)
			default:
			}
			if i%2 == 0 {
				err := held[i].Release(bg)
				if err != nil {
					t.Fatalf("release %d: %v", i, err)
				}
			} else if err := ra.Unlock(held[i].Context()); err != nil { // without the handle
				t.Fatalf("unlock %d: %v", i, err)
			}
			if i > 0 && held[0].Context().Err() != nil {
				t.Fatal("outer hold's Context ended with holds left")
			}
		}
		select {
		case l := <-got:
			if l == nil {
				return
			}
			if l.Fence() <= held[0].Fence() {
				t.Fatalf("bob's fence %d after alice's %d", l.Fence(), held[0].Fence())
			}
			if held[0].Context().Err() == nil {
				t.Fatal("alice's Context still live after her last release")
			}
			if err := held[0].Release(bg); !errors.Is(err, lock.ErrNotOwner) {
				t.Fatalf("double release: %v", err)
			}
			if err := ra.Unlock(alice); !errors.Is(err, lock.ErrNotOwner) {
				t.Fatalf("alice unlocking bob's lock: %v", err)
			}
			if err := l.Release(bg); err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("bob not woken by alice's last release")
		}
		if rdb.Exists(bg, a.Key(name)).Val() != 0 {
			t.Fatal("lock key left after the last release")
		}
	})
}

// Without an owner in ctx, Lock generates one and puts it in the lock's Context: locking
// again under that context re-enters, under a fresh context it does not.
func TestReentrantGeneratedOwner(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testenv.Redis(t), lock.Options{})
	r := c.NewReentrant(uniq("gen"), lock.LockOptions{})
	outer, err := r.TryLock(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lock.OwnerOf(outer.Context()); !ok {
		t.Fatal("no owner in the lock's Context")
	}
	inner, err := r.TryLock(outer.Context(), 0)
	if err != nil {
		t.Fatalf("re-entering under the lock's Context: %v", err)
	}
	if _, err := r.TryLock(ctx, 0); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("fresh context: %v", err)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Goroutines of one owner waiting for a lock another owner holds all get it when it is
// released: the first re-entrant acquisition wakes the others of its owner.
func TestReentrantSameOwnerWaiters(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	a, b := newClient(t, rdb, lock.Options{}), newClient(t, rdb, lock.Options{})
	name := uniq("owners")
	other, err := a.NewReentrant(name, lock.LockOptions{}).TryLock(lock.WithOwner(ctx, "x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := b.NewReentrant(name, lock.LockOptions{})
	job := lock.WithOwner(ctx, "job")
	got := make(chan *lock.Lock, 3)
	for range 3 {
		go func() {
			l, err := r.TryLock(job, 5*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
	}
	time.Sleep(100 * time.Millisecond)
	_ = other.Release(ctx)
	deadline := time.After(2 * time.Second)
	for range 3 {
		select {
		case l := <-got:
			if l != nil {
				defer l.Release(ctx)
			}
		case <-deadline:
			t.Fatal("same-owner waiters not all woken")
		}
	}
	if n, _ := r.HoldCount(job); n != 3 {
		t.Fatalf("HoldCount = %d, want 3", n)
	}
}

// A reentrant hold lost in Redis and taken again by the same owner: the old handle is lost
// and its Release does not count down the new hold.
func TestReentrantLostAndRetaken(t *testing.T) {
	ctx := lock.WithOwner(context.Background(), "job-7")
	rdb := testenv.Redis(t)
	c := newClient(t, rdb, lock.Options{})
	name := uniq("retaken")
	r := c.NewReentrant(name, lock.LockOptions{})
	old, err := r.TryLock(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, c.Key(name))
	fresh, err := r.TryLock(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Fence() <= old.Fence() {
		t.Fatalf("fence %d after %d", fresh.Fence(), old.Fence())
	}
	if cause := context.Cause(old.Context()); !errors.Is(cause, lock.ErrLockLost) {
		t.Fatalf("old handle's cause: %v", cause)
	}
	if err := old.Release(ctx); !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("old handle's Release: %v", err)
	}
	if n, _ := r.HoldCount(ctx); n != 1 {
		t.Fatalf("HoldCount %d after the old handle's release, want 1", n)
	}
	if fresh.Context().Err() != nil {
		t.Fatal("fresh hold's Context ended")
	}
	if err := fresh.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
