// Package lua holds every Redis script of the project, one file per concern, embedded at build
// time. Each script's keys arrive in KEYS (never built inside the script) and share one hash
// tag, so the scripts run unchanged on Redis Cluster.
package lua

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// load joins the named files into one script, in order: shared Lua functions (such as
// lock_fence.lua) first, the script's own file last. Redis has no include.
func load(names ...string) *redis.Script {
	var src []byte
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			panic("lua: missing embedded script " + name)
		}
		src = append(src, b...)
	}
	return redis.NewScript(string(src))
}

var (
	// LoginSendCode stores a fresh login code unless the phone's cooldown runs, and starts
	// the next, escalating, cooldown.
	LoginSendCode = load("login_send_code.lua")
	// RateWindow counts an event in a fixed window against a limit (login code sends per
	// client and server-wide).
	RateWindow = load("rate_window.lua")
	// LoginVerifyCode checks a login code, counting wrong tries and burning the code on success.
	LoginVerifyCode = load("login_verify_code.lua")

	// CacheLease reads a cache entry or takes the lease to load it.
	CacheLease = load("cache_lease.lua")
	// CacheFill writes a loaded value back if the lease is still held (stale-set protection).
	CacheFill = load("cache_fill.lua")
	// CacheRelease gives a lease back after a failed load.
	CacheRelease = load("cache_release.lua")
	// CacheSet sets or deletes a value and revokes any lease.
	CacheSet = load("cache_set.lua")
	// BloomTest answers, for each id, whether all of its k bits are set in a Bloom filter bitmap:
	// one read-only round trip for a whole batch of ids.
	BloomTest = load("bloom_test.lua")
	// BloomAdd sets ids' bits in a built Bloom filter, and in the one being rebuilt if a rebuild
	// runs, in one round trip; it never creates a filter.
	BloomAdd = load("bloom_add.lua")
	// BloomRebuildBegin takes a Bloom filter's rebuild lease and allocates the bitmap to build.
	BloomRebuildBegin = load("bloom_rebuild_begin.lua")
	// BloomRebuildAdd writes one batch of a rebuild's bits, if the rebuild still holds the lease.
	BloomRebuildAdd = load("bloom_rebuild_add.lua")
	// BloomRebuildCommit atomically swaps a rebuilt Bloom filter (bitmap and meta) in.
	BloomRebuildCommit = load("bloom_rebuild_commit.lua")
	// BloomRebuildAbort drops a half-built Bloom filter and releases the lease.
	BloomRebuildAbort = load("bloom_rebuild_abort.lua")

	// LockObtain takes a lock (SET NX PX) and draws its fencing token (lock_fence.lua), or
	// reports how long the holder's lease has left; a tombstone left by LockRelease makes it
	// fail.
	LockObtain = load("lock_fence.lua", "lock_obtain.lua")
	// LockRelease deletes a lock if the caller's token still holds it and publishes the
	// release; given a tombstone key, it also cancels an acquisition that has not run yet.
	LockRelease = load("lock_release.lua")
	// LockExtend resets a lock's lease if the caller's token still holds it.
	LockExtend = load("lock_extend.lua")
	// LockReentrantObtain takes a reentrant lock (a hash of the owner, the fence and one field
	// per hold) or adds a hold by its owner; the fencing token is drawn at the first
	// acquisition only.
	LockReentrantObtain = load("lock_fence.lua", "lock_reentrant_obtain.lua")
	// LockReentrantRelease gives back one hold; the last one deletes the lock and publishes.
	// Given a tombstone key, it also cancels an acquisition that has not run yet.
	LockReentrantRelease = load("lock_reentrant_release.lua")
	// LockReentrantExtend extends a reentrant lock's lease to at least a duration if the owner
	// holds it; it never shortens it.
	LockReentrantExtend = load("lock_reentrant_extend.lua")
	// LockFenceFloor raises a fence counter to at least a value (Redlock's monotonic fence).
	LockFenceFloor = load("lock_fence_floor.lua")

	// SeckillGrab admits buyers to a flash sale (stock, one order per user, sale window),
	// one or many grabs of one voucher per call, and appends their orders to the voucher's
	// stream, or says why not; every check that can fail comes before the first write.
	SeckillGrab = load("seckill_grab.lua")
	// SeckillWarmReset starts a full rebuild of a voucher's admission state (admission pauses).
	SeckillWarmReset = load("seckill_warm_reset.lua")
	// SeckillWarmBuyers adds one batch of buyers during a rebuild.
	SeckillWarmBuyers = load("seckill_warm_buyers.lua")
	// SeckillWarmCommit sets a voucher's window and stock (database stock minus the stream's
	// backlog) and makes it ready.
	SeckillWarmCommit = load("seckill_warm_commit.lua")
	// SeckillState tells whether a voucher's sale state is ready and was rebuilt under the
	// running Redis process (not before a restart or failover).
	SeckillState = load("seckill_state.lua")
	// SeckillAck acknowledges persisted orders and removes them from the stream (the settled
	// prefix in one trim, the rest one by one).
	SeckillAck = load("seckill_ack.lua")
	// SeckillFail moves an order entry to the dead-letter stream and compensates its admission.
	SeckillFail = load("seckill_fail.lua")
	// SeckillRelink settles an order that stands in the database under another order's id
	// (re-homed, or superseded by the user's existing order): the buyer names that order.
	SeckillRelink = load("seckill_relink.lua")
)
