package lua

import "time"

// The cache's scripts (package cache). Every key pair is a value key and its lease key, which
// share a hash tag.

// LeaseOutcome is what cache_lease.lua did.
type LeaseOutcome int

const (
	LeaseCached LeaseOutcome = 1 // the value is cached: Value holds it
	LeaseTaken  LeaseOutcome = 2 // the caller now holds the lease and loads
	LeaseHeld   LeaseOutcome = 3 // another caller holds the lease for Wait more
)

// LeaseReply is cache_lease.lua's parsed reply.
type LeaseReply struct {
	Outcome LeaseOutcome
	Value   string        // the cached entry, with LeaseCached
	Wait    time.Duration // the holder's remaining lease, with LeaseHeld (< 0: unknown)
}

// cache_lease.lua's modes (ARGV[3]).
const (
	leaseIfMissing = "1"
	leaseIfStale   = "2"
)

var cacheLease = newScript(func(reply any) (LeaseReply, bool) {
	r, ok := reply.([]any)
	if !ok || len(r) != 2 {
		return LeaseReply{}, false
	}
	code, _ := r[0].(int64)
	switch o := LeaseOutcome(code); o {
	case LeaseCached, LeaseTaken:
		v, ok := r[1].(string)
		return LeaseReply{Outcome: o, Value: v}, ok
	case LeaseHeld:
		ms, ok := r[1].(int64)
		return LeaseReply{Outcome: o, Wait: time.Duration(ms) * time.Millisecond}, ok
	}
	return LeaseReply{}, false
}, "cache_lease.lua")

// CacheLease reads a cache entry or takes the lease (for lease) to load it.
func CacheLease(valueKey, leaseKey, token string, lease time.Duration) Call[LeaseReply] {
	return cacheLease.call([]string{valueKey, leaseKey}, token, ms(lease), leaseIfMissing)
}

// CacheLeaseIfStale takes the lease only if the value is missing or still carries the
// expire-at bytes the caller saw (a logical rebuild); else it returns the value.
func CacheLeaseIfStale(valueKey, leaseKey, token string, lease time.Duration, seen []byte) Call[LeaseReply] {
	return cacheLease.call([]string{valueKey, leaseKey}, token, ms(lease), leaseIfStale, seen)
}

var cacheFill = newScript(parseFlag, "cache_fill.lua")

// CacheFill writes a loaded value back if the lease is still held (stale-set protection):
// false when refused. ttlMS 0 is no expiry; the event goes to channel.
func CacheFill(valueKey, leaseKey, token string, value []byte, ttlMS int64, channel, event string) Call[bool] {
	return cacheFill.call([]string{valueKey, leaseKey}, token, value, ttlMS, channel, event)
}

var cacheRelease = newScript(parseFlag, "cache_release.lua")

// CacheRelease gives a lease back after a failed load: false when not the owner any more.
func CacheRelease(leaseKey, token, channel, event string) Call[bool] {
	return cacheRelease.call([]string{leaseKey}, token, channel, event)
}

var cacheSet = newScript(parseOne, "cache_set.lua")

// CacheSet sets a value (nil: deletes it) and revokes any lease.
func CacheSet(valueKey, leaseKey string, value []byte, ttlMS int64, channel, event string) Call[struct{}] {
	if value == nil {
		value = []byte{}
	}
	return cacheSet.call([]string{valueKey, leaseKey}, value, ttlMS, channel, event)
}

var cacheDrop = newScript(parseFlag, "cache_drop.lua")

// CacheDrop deletes an entry its reader could not decode, if it still holds those bytes:
// whether it did.
func CacheDrop(valueKey string, seen []byte) Call[bool] {
	return cacheDrop.call([]string{valueKey}, seen)
}
