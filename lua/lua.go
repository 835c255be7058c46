// Package lua holds every Redis script of the project, one file per concern, embedded at build
// time. Each script's keys arrive in KEYS (never built inside the script) and share one hash
// tag, so the scripts run unchanged on Redis Cluster.
//
// The id counter's and the seckill scripts have one typed wrapper each, beside the script
// (idgen.go, seckill_grab.go, seckill_warm.go, seckill_state.go, seckill_settle.go):
// arguments in, a reply with named outcomes out, and a reply that cannot be read is an error
// (ErrMalformedReply), never an outcome. The other scripts are still exported as
// *redis.Script until theirs are written.
package lua

import (
	"embed"
	"fmt"

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
	// CacheDrop deletes an entry its reader could not decode, if it still holds those bytes.
	CacheDrop = load("cache_drop.lua")
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
)

// CacheLease modes (ARGV[3]).
const (
	LeaseIfMissing = "1" // return the cached value if there is one, else take the lease
	// LeaseIfStale takes the lease only if the value is missing or still carries the
	// expire-at given as the next argument (a logical rebuild); else it returns the value.
	LeaseIfStale = "2"
)

// LeaseOutcome is what CacheLease did.
type LeaseOutcome int

const (
	LeaseCached LeaseOutcome = 1 // the value is cached: Value holds it
	LeaseTaken  LeaseOutcome = 2 // the caller now holds the lease and loads
	LeaseHeld   LeaseOutcome = 3 // another caller holds the lease for WaitMS more
)

// LeaseReply is CacheLease's parsed reply.
type LeaseReply struct {
	Outcome LeaseOutcome
	Value   string // the cached entry, with LeaseCached
	WaitMS  int64  // the holder's remaining lease, with LeaseHeld
}

// ParseCacheLease parses the reply of CacheLease (pass Cmd.Result()).
func ParseCacheLease(reply any, err error) (LeaseReply, error) {
	if err != nil {
		return LeaseReply{}, err
	}
	r, ok := reply.([]any)
	if ok && len(r) == 2 {
		code, _ := r[0].(int64)
		switch LeaseOutcome(code) {
		case LeaseCached, LeaseTaken:
			if v, ok := r[1].(string); ok {
				return LeaseReply{Outcome: LeaseOutcome(code), Value: v}, nil
			}
		case LeaseHeld:
			if ms, ok := r[1].(int64); ok {
				return LeaseReply{Outcome: LeaseHeld, WaitMS: ms}, nil
			}
		}
	}
	return LeaseReply{}, fmt.Errorf("lua: cache_lease: malformed reply %v", reply)
}
