package seckill

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/lua"
)

// failures remembers, per stream entry, why its last persist attempt failed in this process:
// an entry is dead-lettered only if it also failed here (see claim).
type failures struct{ m sync.Map }

func (f *failures) note(entry string, err error) { f.m.Store(entry, err) }
func (f *failures) forget(entry string)          { f.m.Delete(entry) }

func (f *failures) failedHere(entry string) bool {
	_, ok := f.m.Load(entry)
	return ok
}

// take returns and forgets why the entry failed here (nil if it did not).
func (f *failures) take(entry string) error {
	v, ok := f.m.LoadAndDelete(entry)
	if !ok {
		return nil
	}
	return v.(error)
}

// settler brings a voucher's Redis state in line with how orders stand in the database: the
// Redis side of settling a stream entry (acknowledged and removed, relinked, dead-lettered).
// The consumer settles what it persists; a rebuild settles what a consumer persisted but did
// not acknowledge.
type settler struct {
	rdb      redis.UniversalClient
	events   *events // announces the orders settled (nil: none)
	keys     keyspace
	group    string
	deadMax  int64 // the dead-letter stream's cap
	failures *failures
	counts   *bucketCounts // a voucher's stock buckets (nil: none, as in tests of parts)
	m        *metrics
	log      *slog.Logger
}

// settle settles a batch's orders: persisted entries are acknowledged and deleted, the buyer
// of an order standing under another id names that order, and an order recorded FAILED before
// is dead-lettered and its admission compensated. If Redis fails here, the entries stay
// pending and their redelivery settles them.
func (s *settler) settle(ctx context.Context, voucherID int, st settlement) error {
	// The database holds these orders' outcome already: announce it before Redis is settled.
	for _, o := range st.done {
		s.events.order(o.id, o.user, voucherID, seckillorder.StatusCREATED)
	}
	for _, r := range st.relinked {
		s.events.order(r.order.id, r.order.user, voucherID, "") // read again: it stands elsewhere
	}
	var errs []error
	if err := s.ack(ctx, voucherID, st.done); err != nil {
		errs = append(errs, err)
	}
	for _, r := range st.relinked {
		if err := s.relink(ctx, voucherID, r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, o := range st.failed {
		// Recorded FAILED by an earlier delivery whose compensation did not run, or while Redis
		// had lost the entry (which came back with an older state). Its unit is not put back:
		// the cause may have been the database's stock (a rebuild recounts it anyway).
		if err := s.fail(ctx, voucherID, o.entry, &o, false, "recorded FAILED by an earlier delivery", 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ack acknowledges persisted orders and removes their entries.
func (s *settler) ack(ctx context.Context, voucherID int, done []order) error {
	if len(done) == 0 {
		return nil
	}
	entries := make([]string, len(done))
	for i, o := range done {
		entries[i] = o.entry
		s.failures.forget(o.entry)
	}
	err := boundedErr(ctx, s.rdb, func(ctx context.Context) error {
		_, err := lua.Ack(ctx, s.rdb, s.keys.script(voucherID), s.group, entries)
		return err
	})
	if err != nil {
		s.log.Warn("acknowledging persisted orders", "voucher", voucherID, "err", err)
		return err
	}
	s.m.persisted.Add(float64(len(done)))
	return nil
}

// relink settles an order standing under another order's id: the buyer names that order.
func (s *settler) relink(ctx context.Context, voucherID int, r relinked) error {
	err := boundedErr(ctx, s.rdb, func(ctx context.Context) error {
		_, err := lua.RelinkEntry(ctx, s.rdb, s.keys.script(voucherID), s.group, lua.Relink{
			Entry: r.order.entry, User: strconv.Itoa(r.order.user), Order: strconv.FormatInt(r.order.id, 10),
			To: strconv.FormatInt(r.to, 10), Superseded: r.superseded,
		})
		return err
	})
	if err != nil {
		s.log.Warn("settling an order standing under another id", "voucher", voucherID, "order", r.order.id, "err", err)
	}
	s.failures.forget(r.order.entry)
	if err == nil && r.superseded {
		s.events.stockChanged(voucherID) // its unit is back on sale
	}
	return err
}

// fail moves an entry to the dead-letter stream and compensates its order's admission (o nil:
// the entry is unreadable), putting the unit back on sale if restore.
func (s *settler) fail(ctx context.Context, voucherID int, entry string, o *order, restore bool, reason string, deliveries int64) error {
	d := lua.DeadLetter{Entry: entry, Restore: restore, Reason: reason, Deliveries: deliveries, MaxLen: s.deadMax}
	if o != nil {
		d.User, d.Order = strconv.Itoa(o.user), strconv.FormatInt(o.id, 10)
	}
	settled, err := bounded(ctx, s.rdb, func(ctx context.Context) (bool, error) {
		return lua.FailEntry(ctx, s.rdb, s.keys.script(voucherID), s.group, d)
	})
	if err != nil {
		s.log.Error("dead-lettering an order entry", "voucher", voucherID, "entry", entry, "err", err)
		return err
	}
	s.failures.forget(entry)
	if settled && o != nil {
		s.releaseBorrower(ctx, voucherID, o)
	}
	if o != nil {
		s.events.order(o.id, o.user, voucherID, seckillorder.StatusFAILED)
	}
	if settled && restore {
		s.events.stockChanged(voucherID)
	}
	if settled {
		s.m.dead.Inc()
		s.log.Error("order FAILED and compensated", "voucher", voucherID, "entry", entry, "order", d.Order,
			"user", d.User, "reason", reason)
	}
	return nil
}

// releaseBorrower lets the user of a failed order buy again when the order had borrowed its
// unit: the entry was in the lending bucket's stream (ref), which FailEntry compensated, but
// the user's buyer record is in the user's own bucket. Released only if it still names this
// order. Should this fail, the user stays a buyer of a FAILED order (told ALREADY_PURCHASED)
// until the sale's keys go; the stock is exact either way. Logged and counted.
func (s *settler) releaseBorrower(ctx context.Context, ref int, o *order) {
	if s.counts == nil {
		return
	}
	v := voucherOf(ref)
	k, err := s.counts.of(ctx, v)
	if err == nil && k <= 1 {
		return
	}
	if err == nil {
		home := bucketRef(v, homeBucket(o.user, k), k)
		if home == ref {
			return // not borrowed: FailEntry released the buyer
		}
		_, err = bounded(ctx, s.rdb, func(ctx context.Context) (bool, error) {
			return lua.BorrowEnd(ctx, s.rdb, s.keys.script(home), o.user, o.id, false)
		})
	}
	if err != nil {
		s.m.background.WithLabelValues(opReleaseBorrower).Inc()
		s.log.Error("releasing the buyer of a failed borrowed order", "voucher", v, "order", o.id, "user", o.user, "err", err)
	}
}
