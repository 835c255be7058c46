package lua

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// IDReservation is what ReserveIDs answers.
type IDReservation struct {
	// Last is the last number reserved: the reservation is [Last-n+1, Last].
	Last int64
	// Since is a Unix second: ids made with these numbers must carry this second or a later one.
	Since int64
	// Fenced says this call found a possible loss of the counter (no key, another Redis
	// process, a counter below the floor) and moved Since ahead, or applied a durable fence.
	Fenced bool
	// Expired says Redis's clock has passed the key's expiry: nothing was reserved.
	Expired bool
	// NeedsFence (FenceAsk only) says a possible loss was found and nothing was reserved: record
	// a fence of at least LeastFence and apply it (FenceApply).
	NeedsFence bool
	// TooLate (FenceApply only) says the fence no longer lies LeastFence ahead of Redis's clock,
	// or the call ran after its deadline: nothing was written.
	TooLate bool
	// LeastFence (with NeedsFence or TooLate) is the smallest fence the counter needs now: Redis's
	// clock plus the fence.
	LeastFence int64
	// RedisNow (with NeedsFence or TooLate) is Redis's clock when the script ran, in Unix ms: the
	// clock FenceApply's deadline is read by.
	RedisNow int64
}

// FenceMode says how ReserveIDs fences a counter after a possible loss.
type FenceMode struct {
	fence    int64 // 0: in place; -1: ask; > 0: apply this fence
	notAfter int64 // Unix ms: an apply that runs later changes nothing
}

var (
	// FenceInPlace fences in Redis alone (no epoch store): since = Redis's clock plus the fence.
	FenceInPlace = FenceMode{}
	// FenceAsk reports a possible loss (NeedsFence) instead of fencing, writing nothing.
	FenceAsk = FenceMode{fence: -1}
)

// FenceApply applies fence, a Unix second recorded outside Redis, as the counter's since, if
// Redis's clock (Unix ms) has not passed notAfter.
func FenceApply(fence, notAfterMs int64) FenceMode {
	return FenceMode{fence: fence, notAfter: notAfterMs}
}

var idgenNext = newScript(func(reply any) (IDReservation, bool) {
	r, ok := ints(reply, 3)
	switch {
	case !ok:
		return IDReservation{}, false
	case r[0] == -1:
		return IDReservation{Expired: true}, true
	case r[0] == -2:
		return IDReservation{NeedsFence: true, LeastFence: r[1], RedisNow: r[2]}, r[1] > 0 && r[2] > 0
	case r[0] == -3:
		return IDReservation{TooLate: true, LeastFence: r[1], RedisNow: r[2]}, r[1] > 0 && r[2] > 0
	}
	return IDReservation{Last: r[0], Since: r[1], Fenced: r[2] == 1}, r[0] >= 0 && r[1] > 0 && isFlag(r[2])
}, "idgen_next.lua")

// ReserveIDs reserves the next n numbers (0: none, only the floor) of the id counter key
// (idgen_next.lua): expireAt is the key's expiry (Unix seconds), floor a number known to be
// issued, fence the seconds Since moves ahead of Redis's clock after a possible loss, mode how
// that fence is set (FenceInPlace, FenceAsk, FenceApply).
func ReserveIDs(ctx context.Context, rdb redis.Scripter, key string, n, expireAt, floor, fence int64, mode FenceMode) (IDReservation, error) {
	return idgenNext.call([]string{key}, n, expireAt, floor, fence, mode.fence, mode.notAfter).Run(ctx, rdb)
}
