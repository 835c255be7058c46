package lua

import "time"

// The lock scripts (package lock). A lock's keys share its hash tag: the lock, its fence
// counter, and one tombstone per cancelled acquisition.

// LockKeys are the keys an acquisition touches.
type LockKeys struct {
	Lock, Fence string
	Tombstone   string // this acquisition's: present, it must not take the lock
}

// Grant is the reply of an acquire script.
type Grant struct {
	Taken bool
	Fence int64 // taken: the fencing token
	Holds int64 // taken: the owner's holds, this one included (1 for a simple lock)
	// RetryIn: not taken, the holder's remaining lease (< 0: held without expiry; 0 with
	// the acquisition cancelled before it ran).
	RetryIn time.Duration
}

func grantOf(r []int64) Grant {
	if r[0] != 1 {
		return Grant{RetryIn: time.Duration(r[1]) * time.Millisecond}
	}
	g := Grant{Taken: true, Fence: r[1], Holds: 1}
	if len(r) == 3 {
		g.Holds = r[2]
	}
	return g
}

var (
	lockObtain = newScript(func(reply any) (Grant, bool) {
		r, ok := ints(reply, 2)
		return grantOfChecked(r, ok)
	}, "lock_fence.lua", "lock_obtain.lua")
	lockReentrantObtain = newScript(func(reply any) (Grant, bool) {
		r, ok := ints(reply, 3)
		return grantOfChecked(r, ok && (r[0] == 0 || r[2] >= 1))
	}, "lock_fence.lua", "lock_reentrant_obtain.lua")
)

func grantOfChecked(r []int64, ok bool) (Grant, bool) {
	if !ok || (r[0] != 0 && r[0] != 1) || (r[0] == 1 && r[1] <= 0) {
		return Grant{}, false
	}
	return grantOf(r), true
}

// LockObtain takes a lock for token (SET NX PX) and draws its fencing token, whose counter
// lives fenceTTL; a tombstone for the acquisition makes it fail.
func LockObtain(k LockKeys, token string, lease, fenceTTL time.Duration) Call[Grant] {
	return lockObtain.call([]string{k.Lock, k.Fence, k.Tombstone}, token, ms(lease), ms(fenceTTL))
}

// LockReentrantObtain takes a reentrant lock for owner, or adds the hold holdID if owner
// holds it already; the fencing token is drawn at the first acquisition only.
func LockReentrantObtain(k LockKeys, owner, holdID string, lease, fenceTTL time.Duration) Call[Grant] {
	return lockReentrantObtain.call([]string{k.Lock, k.Fence, k.Tombstone}, owner, holdID, ms(lease), ms(fenceTTL))
}

// Cancel turns a release into the cancellation of an acquisition whose reply never came: if
// it has not run, its tombstone (kept TTL) makes it fail should it still arrive.
type Cancel struct {
	Tombstone string
	TTL       time.Duration
}

// releaseCall builds a release script's call: keys and args, plus the tombstone's to cancel.
func releaseCall[T any](s script[T], lock, id, channel string, cancel *Cancel) Call[T] {
	if cancel == nil {
		return s.call([]string{lock}, id, channel)
	}
	return s.call([]string{lock, cancel.Tombstone}, id, channel, ms(cancel.TTL))
}

var lockRelease = newScript(parseFlag, "lock_release.lua")

// LockRelease deletes a lock if token holds it and publishes on channel: whether it did.
// With cancel it also cancels the acquisition with token.
func LockRelease(lock, token, channel string, cancel *Cancel) Call[bool] {
	return releaseCall(lockRelease, lock, token, channel, cancel)
}

var lockExtend = newScript(parseFlag, "lock_extend.lua")

// LockExtend resets a lock's lease if token still holds it: whether it did.
func LockExtend(lock, token string, lease time.Duration) Call[bool] {
	return lockExtend.call([]string{lock}, token, ms(lease))
}

// HoldRelease is lock_reentrant_release.lua's answer.
type HoldRelease struct {
	Found bool  // the hold was there
	Left  int64 // found: the holds left (0: the lock is released)
}

var lockReentrantRelease = newScript(func(reply any) (HoldRelease, bool) {
	n, ok := reply.(int64)
	return HoldRelease{Found: n >= 0, Left: max(n, 0)}, ok && n >= -1
}, "lock_reentrant_release.lua")

// LockReentrantRelease gives back the hold holdID; the last one deletes the lock and
// publishes on channel. With cancel it also cancels the acquisition of holdID.
func LockReentrantRelease(lock, holdID, channel string, cancel *Cancel) Call[HoldRelease] {
	return releaseCall(lockReentrantRelease, lock, holdID, channel, cancel)
}

var lockReentrantExtend = newScript(parseFlag, "lock_reentrant_extend.lua")

// LockReentrantExtend extends a reentrant lock's lease to at least lease if owner holds it
// (never shortens it): whether owner holds it.
func LockReentrantExtend(lock, owner string, lease time.Duration) Call[bool] {
	return lockReentrantExtend.call([]string{lock}, owner, ms(lease))
}

var lockFenceFloor = newScript(parseInt, "lock_fence_floor.lua")

// LockFenceFloor raises a fence counter to at least floor (Redlock's monotonic fence),
// renewing its TTL: the counter after the raise.
func LockFenceFloor(fence string, floor int64, ttl time.Duration) Call[int64] {
	return lockFenceFloor.call([]string{fence}, floor, ms(ttl))
}

// ms is a duration in whole milliseconds, at least 1: Redis refuses a PX of 0.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
