package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

type ownerKey struct{}

// WithOwner returns a context carrying the owner id of reentrant locks: locks taken with
// contexts carrying the same owner re-enter each other instead of waiting. Use an id that
// names the unit of work (a request id, a job id), not a goroutine. id must not be empty.
//
// Reentrant.Lock without an owner in ctx generates a random one and puts it in the returned
// lock's Context: pass that context (or one derived from it) down to code that locks the
// same name again, and it re-enters.
func WithOwner(ctx context.Context, id string) context.Context {
	if id == "" {
		panic("lock: WithOwner with an empty owner id")
	}
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerOf returns the owner id ctx carries, if any.
func OwnerOf(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(ownerKey{}).(string)
	return id, ok && id != ""
}

// Reentrant is a reentrant lock in the Redisson tradition: a Redis hash {owner -> hold
// count} (plus the fencing token under the field ""), where the owner comes from the context
// (WithOwner). The same owner may take it again (the count goes up, the fencing token stays
// the first acquisition's); each Release or Unlock gives one hold back, and the last one
// deletes the lock and wakes the waiters. A simple lock and a reentrant lock of the same
// name exclude each other.
//
// In one process, the holds of one owner share one lease (and watchdog): the first
// acquisition's LockOptions govern it. An owner id is best used by one process at a time.
type Reentrant struct {
	c    *Client
	name string
	o    LockOptions
}

// NewReentrant returns the reentrant lock name with options o (o.Wait is set by each call).
func (c *Client) NewReentrant(name string, o LockOptions) *Reentrant {
	return &Reentrant{c: c, name: name, o: o}
}

type holdKey struct{ name, owner string }

// hold is one owner's holds of one reentrant lock in this process.
type hold struct {
	key     holdKey
	lease   *lease
	handles []*Lock // not yet released, oldest first
	// superseded: Redis granted the owner a fresh acquisition while this hold's handles were
	// still out, so they had lost the lock; their releases must not count down the new one.
	superseded bool
}

// Lock waits until the lock is obtained (or re-entered) or ctx ends.
func (r *Reentrant) Lock(ctx context.Context) (*Lock, error) {
	o := r.o
	o.Wait = -1
	return r.obtain(ctx, o)
}

// TryLock waits at most wait (0: tries once) and returns ErrNotObtained if another owner
// held the lock all along.
func (r *Reentrant) TryLock(ctx context.Context, wait time.Duration) (*Lock, error) {
	o := r.o
	o.Wait = max(wait, 0)
	return r.obtain(ctx, o)
}

func (r *Reentrant) obtain(ctx context.Context, o LockOptions) (*Lock, error) {
	c := r.c
	if err := checkName(r.name); err != nil {
		return nil, err
	}
	if c.reg.isClosed() {
		return nil, ErrClosed
	}
	owner, ok := OwnerOf(ctx)
	if !ok {
		owner = newToken()
		ctx = WithOwner(ctx, owner)
	}
	keys := []string{c.Key(r.name), c.fenceKey(r.name)}
	ttl := c.leaseOf(o)
	var fence, holds int64
	var start time.Time
	attempt := func(ctx context.Context) (bool, time.Duration, error) {
		start = time.Now()
		res, err := lua.LockReentrantObtain.Run(ctx, c.rdb, keys, owner, ms(ttl)).Int64Slice()
		if err != nil {
			if ctx.Err() != nil {
				return false, 0, ctx.Err()
			}
			return false, 0, fmt.Errorf("lock: obtain %s: %w", keys[0], err)
		}
		if res[0] == 1 {
			fence, holds = res[1], res[2]
			return true, 0, nil
		}
		return false, time.Duration(res[1]) * time.Millisecond, nil
	}
	ch := c.channel(r.name)
	if err := await(ctx, o.Wait, []watch{{c.subs, ch}}, c.reg.closed, attempt); err != nil {
		return nil, err
	}
	// Other goroutines of this owner waiting here can re-enter now.
	c.subs.wakeOwner(ch, owner)

	hk := holdKey{r.name, owner}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[hk]
	if h != nil && (holds == 1 || h.lease.ctx.Err() != nil) {
		if holds == 1 {
			// Redis granted a fresh acquisition: the local holds had lost the lock. Their
			// watchdog stops now; their releases must not count the new hold down.
			h.superseded = true
			cause := lost("%s was lost and taken again by owner %q", keys[0], owner)
			h.lease.end(cause)
			for _, x := range h.handles { // now, not when the lease's AfterFunc runs
				x.cancelOwn(cause)
			}
		}
		h = nil
	}
	if h == nil {
		h = &hold{key: hk}
		h.lease = c.reg.startLease(ctx, start, ttl, o, func(ctx context.Context, ttl time.Duration) error {
			n, err := lua.LockReentrantExtend.Run(ctx, c.rdb, keys[:1], owner, ms(ttl)).Int()
			if err != nil {
				return fmt.Errorf("lock: extend %s: %w", keys[0], err)
			}
			if n == 0 {
				return lost("%s is no longer held by owner %q", keys[0], owner)
			}
			return nil
		})
		c.holds[hk] = h
	}
	hctx, hcancel := context.WithCancelCause(context.WithoutCancel(ctx))
	leaseCtx := h.lease.ctx
	stop := context.AfterFunc(leaseCtx, func() { hcancel(context.Cause(leaseCtx)) })
	l := &Lock{names: []string{r.name}, fences: []int64{fence}, lease: h.lease, ctx: hctx}
	l.cancelOwn = hcancel
	l.unlink = func() { stop(); hcancel(nil) }
	l.release = func(ctx context.Context) error { return c.releaseHold(ctx, h, l) }
	h.handles = append(h.handles, l)
	return l, nil
}

// releaseHold gives back the hold of handle l; the last local handle ends the shared lease.
func (c *Client) releaseHold(ctx context.Context, h *hold, l *Lock) error {
	c.mu.Lock()
	for i, x := range h.handles {
		if x == l {
			h.handles = append(h.handles[:i], h.handles[i+1:]...)
			break
		}
	}
	last := len(h.handles) == 0
	if last && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
	superseded := h.superseded
	c.mu.Unlock()
	if last {
		h.lease.end(nil)
	}
	if superseded {
		return lost("%s was lost and taken again by owner %q", c.Key(h.key.name), h.key.owner)
	}
	n, err := c.unlockOwner(ctx, h.key.name, h.key.owner)
	if err != nil {
		return err
	}
	if n < 0 {
		return lost("%s is no longer held by owner %q", c.Key(h.key.name), h.key.owner)
	}
	return nil
}

// unlockOwner runs the release script: holds left, or -1 if the owner held nothing.
func (c *Client) unlockOwner(ctx context.Context, name, owner string) (int64, error) {
	n, err := lua.LockReentrantRelease.Run(ctx, c.rdb, []string{c.Key(name)}, owner, c.channel(name)).Int64()
	if err != nil {
		return 0, fmt.Errorf("lock: release %s: %w", c.Key(name), err)
	}
	return n, nil
}

// Unlock gives back one hold of the owner in ctx, Redisson style (without the handle): the
// most recent handle this process holds for the owner is released; with none (the owner
// took the lock in another process), one hold is given back in Redis directly. It returns
// ErrNotOwner if ctx carries no owner or the owner holds nothing.
func (r *Reentrant) Unlock(ctx context.Context) error {
	owner, ok := OwnerOf(ctx)
	if !ok {
		return ErrNotOwner
	}
	c := r.c
	c.mu.Lock()
	var l *Lock
	if h := c.holds[holdKey{r.name, owner}]; h != nil && len(h.handles) > 0 {
		l = h.handles[len(h.handles)-1]
	}
	c.mu.Unlock()
	if l != nil {
		return l.Release(ctx)
	}
	n, err := c.unlockOwner(ctx, r.name, owner)
	if err != nil {
		return err
	}
	if n < 0 {
		return ErrNotOwner
	}
	return nil
}

// Extend sets the remaining lease of the lock held by the owner in ctx to ttl. It returns
// ErrNotOwner if ctx carries no owner or the owner does not hold the lock.
func (r *Reentrant) Extend(ctx context.Context, ttl time.Duration) error {
	owner, ok := OwnerOf(ctx)
	if !ok {
		return ErrNotOwner
	}
	if ttl <= 0 {
		return errors.New("lock: Extend with a non-positive ttl")
	}
	c := r.c
	c.mu.Lock()
	h := c.holds[holdKey{r.name, owner}]
	c.mu.Unlock()
	if h != nil && h.lease.ctx.Err() == nil {
		if err := h.lease.extend(ctx, ttl); !errors.Is(err, ErrLockLost) {
			return err
		}
		return ErrNotOwner
	}
	n, err := lua.LockReentrantExtend.Run(ctx, c.rdb, []string{c.Key(r.name)}, owner, ms(ttl)).Int()
	if err != nil {
		return fmt.Errorf("lock: extend %s: %w", c.Key(r.name), err)
	}
	if n == 0 {
		return ErrNotOwner
	}
	return nil
}

// HoldCount is how many holds the owner in ctx has on the lock (0 without an owner).
func (r *Reentrant) HoldCount(ctx context.Context) (int, error) {
	owner, ok := OwnerOf(ctx)
	if !ok {
		return 0, nil
	}
	key := r.c.Key(r.name)
	n, err := r.c.rdb.HGet(ctx, key, owner).Int()
	switch {
	case errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "WRONGTYPE"):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("lock: hold count %s: %w", key, err)
	}
	return n, nil
}
