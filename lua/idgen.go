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
	// process, a counter below the floor) and moved Since ahead.
	Fenced bool
	// Expired says Redis's clock has passed the key's expiry: nothing was reserved.
	Expired bool
}

var idgenNext = newScript(func(reply any) (IDReservation, bool) {
	r, ok := ints(reply, 3)
	switch {
	case !ok:
		return IDReservation{}, false
	case r[0] == -1:
		return IDReservation{Expired: true}, true
	}
	return IDReservation{Last: r[0], Since: r[1], Fenced: r[2] == 1}, r[0] >= 0 && r[1] > 0 && isFlag(r[2])
}, "idgen_next.lua")

// ReserveIDs reserves the next n numbers (0: none, only the floor) of the id counter key
// (idgen_next.lua): expireAt is the key's expiry (Unix seconds), floor a number known to be
// issued, fence the seconds Since moves ahead of Redis's clock after a possible loss.
func ReserveIDs(ctx context.Context, rdb redis.Scripter, key string, n, expireAt, floor, fence int64) (IDReservation, error) {
	return idgenNext.call([]string{key}, n, expireAt, floor, fence).Run(ctx, rdb)
}
