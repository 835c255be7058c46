package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
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

// Reentrant is a reentrant lock in the Redisson tradition: a Redis hash holding the owner
// (from the context, WithOwner), the fencing token and one field per hold. The same owner may
// take it again (one more hold; the fencing token stays the first acquisition's); each
// Release or Unlock gives one hold back, and the last one deletes the lock and wakes the
// waiters. A simple lock and a reentrant lock of the same name exclude each other.
//
// In one process, the holds of one owner share one lease (and watchdog): the first
// acquisition's LockOptions govern it, and a nested acquisition pushes it back as it does the
// key's expiry (never shortening either). Holds are given back only through the process that
// took them (its handles, or Unlock with a handle's Context): another process cannot release
// or shorten them while their holder believes it holds the lock. An owner id is best used by
// one process at a time.
type Reentrant struct {
	c    *Client
	name string
	o    LockOptions
}

// ErrAmbiguousUnlock is returned by Reentrant.Unlock when the owner holds several handles of
// the lock in this process and ctx does not say which one to give back.
var ErrAmbiguousUnlock = errors.New("lock: Unlock: the owner holds several handles here; release one, or pass its Context")

// NewReentrant returns the reentrant lock name with options o (o.Wait is set by each call).
func (c *Client) NewReentrant(name string, o LockOptions) *Reentrant {
	return &Reentrant{c: c, name: name, o: o}
}

type holdKey struct{ name, owner string }

// handleKey is the context key of a reentrant handle (in its Context) for one lock.
type handleKey struct {
	c    *Client
	name string
}

// hold is one owner's holds of one reentrant lock in this process: one acquisition in Redis
// (one fence) and its handles, one per hold.
type hold struct {
	key     holdKey
	fence   int64
	lease   *lease
	handles []*Lock // not yet released, oldest first
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
		owner = rand.Text()
		ctx = WithOwner(ctx, owner)
	}
	k := c.keysOf(r.name)
	ttl := c.leaseOf(o)
	holdID := rand.Text()
	var g grant
	var start time.Time
	attempt := func(ctx context.Context) (bool, time.Duration, error) {
		start = time.Now()
		var err error
		g, err = c.acquire(ctx,
			func(ctx context.Context) (grant, error) { return c.obtainHold(ctx, k, owner, holdID, ttl) },
			func(ctx context.Context) error { _, err := releaseHold(ctx, c.rdb, k, holdID, true); return err })
		if err != nil {
			return false, 0, fmt.Errorf("lock: obtain %s: %w", k.lock, err)
		}
		return g.Taken, g.RetryIn, nil
	}
	if err := await(ctx, o.Wait, []watch{{c.subs, k.channel}}, c.reg.closed, attempt); err != nil {
		return nil, err
	}
	// Other goroutines of this owner waiting here can re-enter now.
	c.subs.wakeOwner(k.channel, owner)
	return c.addHandle(ctx, r.name, owner, holdID, g.Fence, start, ttl, o), nil
}

// addHandle makes the handle of a hold just taken (by a request sent at start): it joins the
// owner's hold in this process, or starts one.
func (c *Client) addHandle(ctx context.Context, name, owner, holdID string, fence int64, start time.Time, ttl time.Duration, o LockOptions) *Lock {
	k := c.keysOf(name)
	hk := holdKey{name, owner}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[hk]
	if h != nil && h.fence != fence {
		// Redis granted a fresh acquisition: the local holds had lost the lock. Their
		// watchdog stops now, their handles are told so now (not when the lease's AfterFunc
		// runs), and their releases will find their holds gone.
		cause := lost("%s was lost and taken again by owner %q", k.lock, owner)
		h.lease.end(cause)
		for _, x := range h.handles {
			x.cancelOwn(cause)
		}
		delete(c.holds, hk)
		h = nil
	}
	if h != nil && !h.lease.prolong(start.Add(ttl), true) {
		delete(c.holds, hk) // its lease ended: its handles are lost; this hold starts anew
		h = nil
	}
	if h == nil {
		h = &hold{key: hk, fence: fence}
		h.lease = c.reg.startLease(ctx, start, ttl, o, func(ctx context.Context, ttl time.Duration) error {
			held, err := redisctx.Do(ctx, c.rdb, func(ctx context.Context) (bool, error) { return c.extendOwner(ctx, k, owner, ttl) })
			if err != nil {
				return fmt.Errorf("lock: extend %s: %w", k.lock, err)
			}
			if !held {
				return lost("%s is no longer held by owner %q", k.lock, owner)
			}
			return nil
		})
		c.holds[hk] = h
	}
	l := &Lock{names: []string{name}, fences: []int64{fence}, lease: h.lease, owner: owner}
	hctx, hcancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), handleKey{c, name}, l))
	leaseCtx := h.lease.ctx
	stop := context.AfterFunc(leaseCtx, func() { hcancel(context.Cause(leaseCtx)) })
	l.ctx = hctx
	l.cancelOwn = hcancel
	l.unlink = func() { stop(); hcancel(nil) }
	l.release = func(ctx context.Context) error { return c.releaseHandle(ctx, h, l, holdID) }
	h.handles = append(h.handles, l)
	return l
}

// releaseHandle gives back the hold of handle l; the last local handle ends the shared lease.
func (c *Client) releaseHandle(ctx context.Context, h *hold, l *Lock, holdID string) error {
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
	c.mu.Unlock()
	if last {
		h.lease.end(nil)
	}
	k := c.keysOf(h.key.name)
	r, err := redisctx.Do(ctx, c.rdb, func(ctx context.Context) (lua.HoldRelease, error) { return releaseHold(ctx, c.rdb, k, holdID, false) })
	if err != nil {
		return fmt.Errorf("lock: release %s: %w", k.lock, err)
	}
	if !r.Found {
		return lost("%s no longer has this hold of owner %q", k.lock, h.key.owner)
	}
	return nil
}

// Unlock gives back one hold of the owner in ctx without the handle: the handle whose Context
// ctx is (or derives from), or else the owner's only handle in this process. It returns
// ErrNotOwner if ctx carries no owner or the owner holds no handle here (holds taken by
// another process are given back by that process), ErrAmbiguousUnlock if the owner holds
// several and ctx names none of them.
func (r *Reentrant) Unlock(ctx context.Context) error {
	owner, ok := OwnerOf(ctx)
	if !ok {
		return ErrNotOwner
	}
	if l, ok := ctx.Value(handleKey{r.c, r.name}).(*Lock); ok && l.owner == owner {
		return l.Release(ctx)
	}
	c := r.c
	c.mu.Lock()
	var handles []*Lock
	if h := c.holds[holdKey{r.name, owner}]; h != nil {
		handles = h.handles
	}
	var only *Lock
	if len(handles) == 1 {
		only = handles[0]
	}
	n := len(handles)
	c.mu.Unlock()
	switch {
	case n == 0:
		return ErrNotOwner
	case only == nil:
		return ErrAmbiguousUnlock
	}
	return only.Release(ctx)
}

// Extend extends the lease of the lock held by the owner in ctx to at least ttl. In the
// process holding it, the shared local lease is set to ttl (see Lock.Extend); from another
// process, only Redis's lease is extended, never shortened, so that the holder's belief stays
// true. It returns ErrNotOwner if ctx carries no owner or the owner does not hold the lock.
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
		if err := h.lease.extend(ctx, ttl); !errors.Is(err, ErrLockLost) || errors.Is(err, ErrNotReplicated) {
			return err
		}
		return ErrNotOwner
	}
	k := c.keysOf(r.name)
	held, err := redisctx.Do(ctx, c.rdb, func(ctx context.Context) (bool, error) { return c.extendOwner(ctx, k, owner, ttl) })
	if err != nil {
		return fmt.Errorf("lock: extend %s: %w", k.lock, err)
	}
	if !held {
		return ErrNotOwner
	}
	return nil
}

// HoldCount is how many holds the owner in ctx has on the lock, in all processes (0 without
// an owner).
func (r *Reentrant) HoldCount(ctx context.Context) (int, error) {
	owner, ok := OwnerOf(ctx)
	if !ok {
		return 0, nil
	}
	key := r.c.Key(r.name)
	fields, err := redisctx.Do(ctx, r.c.rdb, func(ctx context.Context) (map[string]string, error) {
		return r.c.rdb.HGetAll(ctx, key).Result()
	})
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("lock: hold count %s: %w", key, err)
	}
	return countHolds(fields, owner), nil
}
