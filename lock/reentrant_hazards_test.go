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

// TestReentrantForeignClient (issue 11, 5a): a process that does not hold the owner's lock
// can neither shorten its lease nor give back its holds: a third owner must not get in while
// the holder's Context still says held.
func TestReentrantForeignClient(t *testing.T) {
	foreign := map[string]func(r *lock.Reentrant, owner context.Context) error{
		"Extend": func(r *lock.Reentrant, owner context.Context) error { return r.Extend(owner, 50*time.Millisecond) },
		"Unlock": func(r *lock.Reentrant, owner context.Context) error { return r.Unlock(owner) },
	}
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		for what, call := range foreign {
			t.Run(what, func(t *testing.T) {
				bg := context.Background()
				name := uniq("foreign")
				holder, other, third := newClient(t, rdb, lock.Options{}), newClient(t, rdb, lock.Options{}), newClient(t, rdb, lock.Options{})
				alice := lock.WithOwner(bg, "alice")
				held, err := holder.NewReentrant(name, lock.LockOptions{}).TryLock(alice, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer held.Release(bg)
				err = call(other.NewReentrant(name, lock.LockOptions{}), alice)
				t.Logf("%s of alice's lock from another client: %v", what, err)
				time.Sleep(200 * time.Millisecond)
				carol, err := third.NewReentrant(name, lock.LockOptions{}).TryLock(lock.WithOwner(bg, "carol"), 0)
				if err == nil {
					defer carol.Release(bg)
					if held.Context().Err() == nil {
						t.Fatalf("carol obtained the lock while alice's Context still says held")
					}
				}
				if held.Context().Err() != nil {
					t.Fatalf("alice lost her lock: %v", context.Cause(held.Context()))
				}
			})
		}
	})
}

// TestReentrantAbandonedAcquire (issue 11, 5b): a nested acquisition whose reply never reaches
// the caller (Redis hung past the caller's deadline, then ran it) must not leave a hold that
// no Release removes: once the outer hold is released, another owner gets the lock at once.
func TestReentrantAbandonedAcquire(t *testing.T) {
	bg := context.Background()
	srv, _, c := privateLocks(t, lock.Options{})
	name := uniq("abandoned-nested")
	r := c.NewReentrant(name, lock.LockOptions{})
	job := lock.WithOwner(bg, "job")
	outer, err := r.TryLock(job, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	ctx, cancel := context.WithTimeout(job, callDeadline)
	_, err = r.TryLock(ctx, 0)
	cancel()
	if err == nil {
		t.Fatal("nested TryLock succeeded on a frozen Redis")
	}
	srv.Thaw()
	time.Sleep(300 * time.Millisecond) // the abandoned acquisition runs, and is undone
	if err := outer.Release(bg); err != nil {
		t.Fatal(err)
	}
	other, err := c.NewReentrant(name, lock.LockOptions{}).TryLock(lock.WithOwner(bg, "other"), time.Second)
	if err != nil {
		t.Fatalf("another owner after the last release: %v (a hold was left behind)", err)
	}
	_ = other.Release(bg)
}

// TestReentrantUnlockOwnHandle (issue 11, 5c): Unlock with a handle's Context gives back that
// handle, not another goroutine's hold of the same owner.
func TestReentrantUnlockOwnHandle(t *testing.T) {
	bg := context.Background()
	c := newClient(t, testenv.Redis(t), lock.Options{})
	r := c.NewReentrant(uniq("unlock-own"), lock.LockOptions{})
	job := lock.WithOwner(bg, "job")
	mine, err := r.TryLock(job, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := make(chan *lock.Lock)
	go func() { // another goroutine of the same unit of work
		l, err := r.TryLock(job, 0)
		if err != nil {
			t.Error(err)
		}
		theirs <- l
	}()
	other := <-theirs
	if other == nil {
		return
	}
	defer other.Release(bg)
	if err := r.Unlock(mine.Context()); err != nil {
		t.Fatal(err)
	}
	if other.Context().Err() != nil {
		t.Fatalf("Unlock gave back the other goroutine's handle: %v", context.Cause(other.Context()))
	}
	if mine.Context().Err() == nil {
		t.Fatal("Unlock with my handle's Context left my handle held")
	}
}

// TestReentrantNestedRearmsLease (issue 11, 5d): a nested acquisition pushes the lock's expiry
// in Redis back, and the shared local lease with it: neither handle is reported lost while
// Redis still holds the key.
func TestReentrantNestedRearmsLease(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		const lease = 400 * time.Millisecond
		bg := context.Background()
		c := newClient(t, rdb, lock.Options{})
		name := uniq("rearm")
		r := c.NewReentrant(name, lock.LockOptions{Lease: lease})
		job := lock.WithOwner(bg, "job")
		start := time.Now()
		outer, err := r.TryLock(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease * 5 / 8)
		inner, err := r.TryLock(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(start.Add(lease * 9 / 8)))
		if rdb.Exists(bg, c.Key(name)).Val() != 1 {
			t.Fatal("Redis no longer holds the lock after the nested acquisition")
		}
		for what, l := range map[string]*lock.Lock{"outer": outer, "inner": inner} {
			if l.Context().Err() != nil {
				t.Errorf("%s handle lost while Redis holds the lock: %v", what, context.Cause(l.Context()))
			}
		}
		_ = inner.Release(bg)
		_ = outer.Release(bg)
	})
}

// TestReleaseNilLock (issue 11, 5e): Release of the nil *Lock a failed Obtain returns is an
// error, not a panic (as in bsm/redislock).
func TestReleaseNilLock(t *testing.T) {
	bg := context.Background()
	c := newClient(t, testenv.Redis(t), lock.Options{})
	name := uniq("nil")
	held, err := c.Obtain(bg, name, lock.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(bg)
	l, err := c.Obtain(bg, name, lock.LockOptions{})
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain of a held lock: %v", err)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Release of the nil *Lock panicked: %v", p)
		}
	}()
	if err := l.Release(bg); !errors.Is(err, lock.ErrNotOwner) {
		t.Fatalf("Release of the nil *Lock: %v, want ErrNotOwner", err)
	}
	if err := l.Extend(bg, time.Second); !errors.Is(err, lock.ErrNotOwner) {
		t.Fatalf("Extend of the nil *Lock: %v, want ErrNotOwner", err)
	}
}
