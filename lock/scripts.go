package lock

import (
	"context"
	"fmt"
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
type grant struct {
	taken   bool
	fence   int64
	holds   int64         // reentrant: the owner's holds, this one included
	retryIn time.Duration // not taken: the holder's remaining lease (< 0: unknown)
}

func parseGrant(res []int64, err error) (grant, error) {
	if err != nil {
		return grant{}, err
	}
	if len(res) < 2 {
		return grant{}, fmt.Errorf("lock: malformed acquire reply %v", res)
	}
	if res[0] != 1 {
		return grant{retryIn: time.Duration(res[1]) * time.Millisecond}, nil
	}
	g := grant{taken: true, fence: res[1], holds: 1}
	if len(res) > 2 {
		g.holds = res[2]
	}
	return g, nil
}

func fenceTTL(lease time.Duration) time.Duration { return lease + fenceCounterMargin }

// obtainToken runs lock_obtain.lua: SET NX PX plus the next fencing token.
func obtainToken(ctx context.Context, rdb redis.UniversalClient, k keys, token string, lease time.Duration) (grant, error) {
	return parseGrant(lua.LockObtain.Run(ctx, rdb, []string{k.lock, k.fence, k.tombstone(token)},
		token, ms(lease), ms(fenceTTL(lease))).Int64Slice())
}

// releaseToken runs lock_release.lua: whether the token held the lock (and released it).
func releaseToken(ctx context.Context, rdb redis.UniversalClient, k keys, token string) (bool, error) {
	n, err := lua.LockRelease.Run(ctx, rdb, []string{k.lock}, token, k.channel).Int()
	return n == 1, err
}

// cancelToken releases the lock if token holds it, and otherwise leaves a tombstone that
// makes the acquisition with token fail if it has not run yet.
func cancelToken(ctx context.Context, rdb redis.UniversalClient, k keys, token string) error {
	return lua.LockRelease.Run(ctx, rdb, []string{k.lock, k.tombstone(token)}, token, k.channel, ms(tombstoneTTL)).Err()
}

// extendToken runs lock_extend.lua: whether the token still held the lock.
func extendToken(ctx context.Context, rdb redis.UniversalClient, k keys, token string, ttl time.Duration) (bool, error) {
	n, err := lua.LockExtend.Run(ctx, rdb, []string{k.lock}, token, ms(ttl)).Int()
	return n == 1, err
}

// obtainHold runs lock_reentrant_obtain.lua: takes the reentrant lock for owner, or adds the
// hold holdID if owner holds it already.
func obtainHold(ctx context.Context, rdb redis.UniversalClient, k keys, owner, holdID string, lease time.Duration) (grant, error) {
	return parseGrant(lua.LockReentrantObtain.Run(ctx, rdb, []string{k.lock, k.fence, k.tombstone(holdID)},
		owner, holdID, ms(lease), ms(fenceTTL(lease))).Int64Slice())
}

// holdGone is releaseHold's answer when the hold was not there.
const holdGone = -1

// releaseHold runs lock_reentrant_release.lua: the holds left, or holdGone.
func releaseHold(ctx context.Context, rdb redis.UniversalClient, k keys, holdID string) (int64, error) {
	return lua.LockReentrantRelease.Run(ctx, rdb, []string{k.lock}, holdID, k.channel).Int64()
}

// cancelHold gives back the hold holdID if it is there, and otherwise leaves a tombstone that
// makes the acquisition of holdID fail if it has not run yet.
func cancelHold(ctx context.Context, rdb redis.UniversalClient, k keys, holdID string) error {
	return lua.LockReentrantRelease.Run(ctx, rdb, []string{k.lock, k.tombstone(holdID)}, holdID, k.channel, ms(tombstoneTTL)).Err()
}

// extendOwner runs lock_reentrant_extend.lua: whether owner holds the lock (its lease now at
// least ttl).
func extendOwner(ctx context.Context, rdb redis.UniversalClient, k keys, owner string, ttl time.Duration) (bool, error) {
	n, err := lua.LockReentrantExtend.Run(ctx, rdb, []string{k.lock}, owner, ms(ttl)).Int()
	return n == 1, err
}

// raiseFence runs lock_fence_floor.lua.
func raiseFence(ctx context.Context, rdb redis.UniversalClient, k keys, floor int64, lease time.Duration) error {
	return lua.LockFenceFloor.Run(ctx, rdb, []string{k.fence}, floor, ms(fenceTTL(lease))).Err()
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
