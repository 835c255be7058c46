package seckill

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
)

// order is one admitted order read from a stream.
type order struct {
	entry string // stream entry id
	id    int64
	user  int
	at    time.Time
}

// The fields seckill_grab.lua writes in a stream entry.
const (
	entryOrder = "o" // order id
	entryUser  = "u" // user id
	entryTime  = "t" // admission time, Unix ms
)

// parseEntry reads the fields the admission script writes.
func parseEntry(m redis.XMessage) (order, error) {
	o := order{entry: m.ID}
	var user, at int64
	for _, f := range []struct {
		name string
		to   *int64
	}{{entryOrder, &o.id}, {entryUser, &user}, {entryTime, &at}} {
		v, ok := m.Values[f.name].(string)
		if !ok {
			return o, fmt.Errorf("entry %s has no field %q", m.ID, f.name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return o, fmt.Errorf("entry %s: field %q = %q is not a positive integer", m.ID, f.name, v)
		}
		*f.to = n
	}
	o.user, o.at = int(user), time.UnixMilli(at).UTC()
	return o, nil
}

// carries reports whether a stream entry still carries this order (after a flush, a new entry
// can get an old one's id).
func (o order) carries(m redis.XMessage) bool {
	return m.ID == o.entry && m.Values[entryOrder] == strconv.FormatInt(o.id, 10)
}

// errStockGuard means the database has fewer units than the batch needs: Redis admitted
// more than the database holds (someone lowered the database stock by hand, or Redis state
// was rebuilt from a stale read). Such orders fail; their units are not put back on sale.
var errStockGuard = errors.New("seckill: database stock lower than the orders admitted")

// errRedisUnavailable wraps a failure to talk to Redis in the middle of a batch: the batch is
// not retried entry by entry (each entry would fail the same way and count a failure against
// it); the reader waits for Redis and then retries its own pending entries.
var errRedisUnavailable = errors.New("seckill: Redis unavailable")

// notMine says some entries of a batch stopped being this consumer's while it wrote them:
// kept are still pending here; gone are in the stream no more (Redis lost them), the others
// were claimed by another consumer.
type notMine struct{ kept, gone []order }

func (e *notMine) Error() string {
	return "seckill: some entries are no longer pending with this consumer"
}

// standing is how an admitted order stands in the database.
type standing int

const (
	standsNowhere   standing = iota // no row, no alias: not written yet
	standsOwn                       // a live row under its own id, of its user and voucher
	standsElsewhere                 // an alias leads to a live order under another id
	standsFailed                    // recorded FAILED or LOST (under its id, or where its alias leads)
	standsTaken                     // its id is another order's row, and no alias leads anywhere
)

// trace is how one order stands.
type trace struct {
	standing   standing
	via        int64 // standsElsewhere: the order standing for it
	superseded bool  // standsElsewhere: the user's other order, not a re-homed copy
}

// givenUp reports whether an order of this status is given up on: FAILED, or LOST (Redis lost
// it before it was written). Neither holds the user's slot nor a unit of stock.
func givenUp(s seckillorder.Status) bool {
	return s == seckillorder.StatusFAILED || s == seckillorder.StatusLOST
}

// orderRow is what tracing needs of an order's row.
type orderRow struct {
	user, voucher int
	failed        bool
}

// aliasKey is an order id a user was told.
type aliasKey struct {
	user int
	id   int64
}

// aliasRow is where an alias leads.
type aliasRow struct {
	to                 int64
	superseded, failed bool
}

// classify tells how an order of a voucher stands, given the rows under the ids in question
// and the aliases from them.
func classify(o order, voucherID int, rows map[int64]orderRow, aliases map[aliasKey]aliasRow) trace {
	if a, ok := aliases[aliasKey{o.user, o.id}]; ok {
		if a.failed {
			return trace{standing: standsFailed}
		}
		return trace{standing: standsElsewhere, via: a.to, superseded: a.superseded}
	}
	row, ok := rows[o.id]
	switch {
	case !ok:
		return trace{standing: standsNowhere}
	case row.user != o.user || row.voucher != voucherOf(voucherID): // or a stock bucket's reference
		return trace{standing: standsTaken}
	case row.failed:
		return trace{standing: standsFailed}
	}
	return trace{standing: standsOwn}
}

// settlement is what a batch leaves to settle in Redis, by how each order stands in the
// database.
type settlement struct {
	done     []order    // a row under the order's own id (written now or before)
	relinked []relinked // stands under another id (an alias leads there)
	failed   []order    // recorded FAILED before this delivery
	// New aliases this transaction wrote, for the metrics.
	rehomed, superseded int
}

// relinked is an order that stands under another order's id: re-homed under a fresh id, or
// superseded by the user's existing order of the voucher (then its unit goes back on sale).
type relinked struct {
	order      order
	to         int64
	superseded bool
}

func (st *settlement) empty() bool { return len(st.done)+len(st.relinked)+len(st.failed) == 0 }

// place files an order by how it stands in the database; false if it stands nowhere yet
// (or its id is another order's).
func (st *settlement) place(o order, tr trace) bool {
	switch tr.standing {
	case standsOwn:
		st.done = append(st.done, o)
	case standsElsewhere:
		st.relinked = append(st.relinked, relinked{order: o, to: tr.via, superseded: tr.superseded})
	case standsFailed:
		st.failed = append(st.failed, o)
	default:
		return false
	}
	return true
}

func (st *settlement) add(o settlement) {
	st.done = append(st.done, o.done...)
	st.relinked = append(st.relinked, o.relinked...)
	st.failed = append(st.failed, o.failed...)
	st.rehomed += o.rehomed
	st.superseded += o.superseded
}
