package seckill

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// dbOrders is a voucher's orders as the database has them.
type dbOrders struct {
	live    map[int]int64         // user -> live order holding the slot
	rows    map[int64]orderRow    // every order of the voucher
	aliases map[aliasKey]aliasRow // every alias of the voucher (see classify)
}

// maxExamples is how many examples of a database problem a report lists; maxLostListed how
// many LOST orders.
const (
	maxExamples   = 5
	maxLostListed = 100
)

// inspectHeld inspects a voucher holding its row lock as well, so that no batch commits
// during the snapshot: consumers serialise on that row lock (with row locks they do not take
// the voucher's Redis lock). It is released before a fix, whose rebuild takes it again. The
// check fails if lost (the voucher's Redis lock) ended meanwhile.
func (rc *reconciler) inspectHeld(ctx context.Context, id int, o ReconcileOptions, lost context.Context) (VoucherReport, error) {
	held, release, err := rc.store.holdVoucher(ctx, id)
	if err != nil {
		return VoucherReport{VoucherID: id}, err
	}
	defer release()
	onLock := *rc
	onLock.store = held // reads on the lock's connection (recoveryStore.holdVoucher)
	r := VoucherReport{VoucherID: id, RedisChecked: true}
	var db dbOrders
	if err := onLock.inspectDB(ctx, &r, &db); err != nil {
		return r, err
	}
	if err := onLock.inspectRedis(ctx, &r, &db, o); err != nil {
		return r, err
	}
	if lost.Err() != nil {
		return r, fmt.Errorf("lock on the voucher lost during the check: %w", context.Cause(lost))
	}
	return r, nil
}

// inspectDB reads the voucher and its orders, and flags what is wrong in the database alone.
func (rc *reconciler) inspectDB(ctx context.Context, r *VoucherReport, out *dbOrders) error {
	sale, err := rc.store.sale(ctx, r.VoucherID)
	switch {
	case err == nil:
		r.Seckill = true
		r.Status = string(sale.status)
		r.DBStock = sale.stock
		r.BeginAt, r.EndAt = &sale.begin, &sale.end
		if r.DBStock < 0 {
			r.problem(false, "database: stock %d is negative (oversold)", r.DBStock)
		}
	case !errors.Is(err, ErrNoSuchVoucher):
		return fmt.Errorf("reading the voucher: %w", err)
	}
	db := dbOrders{live: map[int]int64{}, rows: map[int64]orderRow{}}
	var tally orderTally
	err = rc.store.eachOrder(ctx, r.VoucherID, func(o orderRecord) {
		db.rows[o.id] = orderRow{user: o.user, voucher: r.VoucherID, failed: o.failed}
		tally.count(r, &db, o)
	})
	if err != nil {
		return fmt.Errorf("reading the orders: %w", err)
	}
	tally.report(r)
	if db.aliases, err = rc.inspectAliases(ctx, r); err != nil {
		return err
	}
	if out != nil {
		*out = db
	}
	return nil
}

// orderTally collects what is wrong among a voucher's orders.
type orderTally struct {
	dups                 map[int][]int64 // user -> live orders, for users holding several
	slotless, failedSlot []string
}

// count adds one order: to the report's counts, to the live orders, or to the problems.
func (t *orderTally) count(r *VoucherReport, db *dbOrders, o orderRecord) {
	if o.lost {
		r.DBLost++
		if len(r.LostIDs) < maxLostListed {
			r.LostIDs = append(r.LostIDs, o.id)
		}
	}
	if o.failed {
		r.DBFailed++
		if o.slot {
			t.failedSlot = append(t.failedSlot, strconv.FormatInt(o.id, 10))
		}
		return
	}
	r.DBOrders++
	if !o.slot {
		t.slotless = append(t.slotless, strconv.FormatInt(o.id, 10))
		return
	}
	if prev, ok := db.live[o.user]; ok {
		if t.dups == nil {
			t.dups = map[int][]int64{}
		}
		if len(t.dups[o.user]) == 0 {
			t.dups[o.user] = []int64{prev}
		}
		t.dups[o.user] = append(t.dups[o.user], o.id)
	}
	db.live[o.user] = o.id // the last one, as a rebuild loads them
}

// report adds the problems found to r.
func (t *orderTally) report(r *VoucherReport) {
	if len(t.dups) > 0 {
		users := make([]int, 0, len(t.dups))
		for u := range t.dups {
			users = append(users, u)
		}
		sort.Ints(users)
		var ex []string
		for _, u := range users[:min(maxExamples, len(users))] {
			ex = append(ex, fmt.Sprintf("user %d: orders %v", u, t.dups[u]))
		}
		r.problem(false, "database: %d users hold more than one live order (oversold); e.g. %s", len(t.dups), strings.Join(ex, ", "))
	}
	if len(t.slotless) > 0 {
		r.problem(false, "database: %d live orders hold no slot (a rebuild would not count their buyers); e.g. %s",
			len(t.slotless), strings.Join(t.slotless[:min(maxExamples, len(t.slotless))], ", "))
	}
	if len(t.failedSlot) > 0 {
		r.problem(false, "database: %d FAILED orders still hold the user's slot; e.g. %s",
			len(t.failedSlot), strings.Join(t.failedSlot[:min(maxExamples, len(t.failedSlot))], ", "))
	}
	if r.DBLost > 0 {
		ids := make([]string, 0, maxExamples)
		for _, id := range r.LostIDs[:min(maxExamples, len(r.LostIDs))] {
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		r.note("%d orders LOST (told to their users, lost with Redis's data before they were written; their units went back on sale); e.g. %s",
			r.DBLost, strings.Join(ids, ", "))
	}
	if !r.Seckill && (r.DBOrders > 0 || r.DBFailed > 0) {
		r.problem(false, "database: %d orders of a voucher that is not a seckill voucher", r.DBOrders+r.DBFailed)
	}
}

// inspectAliases reads the voucher's aliases: the orders standing under another id than the
// one their user was told. They are facts, not problems: Redis lost state and the consumer
// kept the orders.
func (rc *reconciler) inspectAliases(ctx context.Context, r *VoucherReport) (map[aliasKey]aliasRow, error) {
	found, err := rc.store.aliases(ctx, r.VoucherID)
	if err != nil {
		return nil, fmt.Errorf("reading the order aliases: %w", err)
	}
	aliases := make(map[aliasKey]aliasRow, len(found))
	for _, a := range found {
		aliases[a.from] = a.to
		if a.to.superseded {
			r.Superseded++
			continue
		}
		r.Rehomed++
		if len(r.RehomedOrders) < maxListed {
			r.RehomedOrders = append(r.RehomedOrders, RehomedOrder{User: a.from.user, Admitted: a.from.id, Order: a.to.to, Failed: a.to.failed})
		}
	}
	if r.Rehomed > 0 {
		var ex []string
		for _, o := range r.RehomedOrders[:min(maxExamples, len(r.RehomedOrders))] {
			ex = append(ex, fmt.Sprintf("user %d: told %d, stored as %d", o.User, o.Admitted, o.Order))
		}
		r.note("%d orders re-homed under a fresh id: their id was another order's (Redis lost the id counter); their users find them under the id they were told; e.g. %s",
			r.Rehomed, strings.Join(ex, ", "))
	}
	if r.Superseded > 0 {
		r.note("%d orders admitted to users who already held one (Redis lost the buyers); the users keep their first order, which the later id leads to", r.Superseded)
	}
	return aliases, nil
}
