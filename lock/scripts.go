package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// One function per Lua script the package runs: arguments in, a parsed reply out. They make
// one plain call each; callers run them through redisctx so that they return at ctx's
// deadline whatever the client's options.

const (
	// fenceCounterMargin is how long a fence counter outlives the lease of the last
	// acquisition that drew from it. While it lives, tokens increase even if Redis's clock
	// steps back; once it expires, the next token is Redis's time, which is later than every
	// earlier token unless the clock went back by more than the lease plus this margin.
	fenceCounterMargin = time.Minute
	// tombstoneTTL is how long a cancelled acquisition stays refused. It only has to outlast
	// the moments a hung Redis takes, once it runs again, to work through the commands it
	// received meanwhile.
	tombstoneTTL = time.Minute
)

// keys are the Redis names of one lock name.
type keys struct {
	lock, fence, channel string
}

func (c *Client) keysOf(name string) keys {
	k := c.Key(name)
	return keys{lock: k, fence: k + ":fence", channel: k + ":released"}
}

// tombstone is the key that cancels the acquisition with this token (or hold id).
func (k keys) tombstone(token string) string { return k.lock + ":void:" + token }

// grant is the reply of an acquire script.
type grant = lua.Grant

func fenceTTL(lease time.Duration) time.Duration { return lease + fenceCounterMargin }

// acquisition is the keys of the acquisition with this token (or hold id).
func (k keys) acquisition(token string) lua.LockKeys {
	return lua.LockKeys{Lock: k.lock, Fence: k.fence, Tombstone: k.tombstone(token)}
}

// cancel is, if asked, what cancels the acquisition with this token (or hold id).
func (k keys) cancel(asked bool, token string) *lua.Cancel {
	if !asked {
		return nil
	}
	return &lua.Cancel{Tombstone: k.tombstone(token), TTL: tombstoneTTL}
}

// Acquisitions and renewals run through runOne: with the replica check, one that wrote and
// was not acknowledged returns ErrNotReplicated. Releases and cancels do not wait for replicas.

func taken(g grant) bool { return g.Taken }
func held(ok bool) bool  { return ok }

// obtainToken runs lock_obtain.lua: SET NX PX plus the next fencing token.
func (c *Client) obtainToken(ctx context.Context, k keys, token string, lease time.Duration) (grant, error) {
	return runOne(ctx, c, k.lock, lua.LockObtain(k.acquisition(token), token, lease, fenceTTL(lease)), taken)
}

// releaseToken runs lock_release.lua: whether the token held the lock (and released it).
// With cancel, a token that did not hold it leaves a tombstone that makes its acquisition
// fail if that has not run yet.
func releaseToken(ctx context.Context, rdb redis.UniversalClient, k keys, token string, cancel bool) (bool, error) {
	return lua.LockRelease(k.lock, token, k.channel, k.cancel(cancel, token)).Run(ctx, rdb)
}

// extendToken runs lock_extend.lua: whether the token still held the lock.
func (c *Client) extendToken(ctx context.Context, k keys, token string, ttl time.Duration) (bool, error) {
	return runOne(ctx, c, k.lock, lua.LockExtend(k.lock, token, ttl), held)
}

// obtainHold runs lock_reentrant_obtain.lua: takes the reentrant lock for owner, or adds the
// hold holdID if owner holds it already.
func (c *Client) obtainHold(ctx context.Context, k keys, owner, holdID string, lease time.Duration) (grant, error) {
	return runOne(ctx, c, k.lock, lua.LockReentrantObtain(k.acquisition(holdID), owner, holdID, lease, fenceTTL(lease)), taken)
}

// releaseHold runs lock_reentrant_release.lua: gives back the hold holdID. With cancel, a
// hold that is not there leaves a tombstone that makes its acquisition fail if that has not
// run yet.
func releaseHold(ctx context.Context, rdb redis.UniversalClient, k keys, holdID string, cancel bool) (lua.HoldRelease, error) {
	return lua.LockReentrantRelease(k.lock, holdID, k.channel, k.cancel(cancel, holdID)).Run(ctx, rdb)
}

// extendOwner runs lock_reentrant_extend.lua: whether owner holds the lock (its lease now at
// least ttl).
func (c *Client) extendOwner(ctx context.Context, k keys, owner string, ttl time.Duration) (bool, error) {
	return runOne(ctx, c, k.lock, lua.LockReentrantExtend(k.lock, owner, ttl), held)
}

// raiseFence runs lock_fence_floor.lua.
func raiseFence(ctx context.Context, rdb redis.UniversalClient, k keys, floor int64, lease time.Duration) error {
	_, err := lua.LockFenceFloor(k.fence, floor, fenceTTL(lease)).Run(ctx, rdb)
	return err
}

// Reserved fields of a reentrant lock's hash; every other field is a hold id.
const (
	ownerField = "owner"
	fenceField = "fence"
)

// countHolds is how many holds owner has in a reentrant lock's fields (HGETALL).
func countHolds(fields map[string]string, owner string) int {
	if fields[ownerField] != owner {
		return 0
	}
	n := 0
	for f := range fields {
		if f != ownerField && f != fenceField {
			n++
		}
	}
	return n
}
