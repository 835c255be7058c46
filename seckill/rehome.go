package seckill

import (
	"context"
	"fmt"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/predicate"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/seckillorderalias"
)

// When Redis loses state (a flush, a failover to a replica that lagged, an AOF that lost its
// tail) three things can reach the database that a healthy Redis never sends:
//   - an order whose id was issued before and is now another order's row (the id counter went
//     back): it is re-homed, stored under a fresh id with an alias from the id its user was told;
//   - an order of a user who already holds one of the voucher (the buyers hash forgot them): it
//     is superseded by that order, with an alias from its id to it, and its unit goes back;
//   - an order a consumer was writing when its entry vanished from the stream: it is recorded
//     FAILED (a rebuild may already have counted without it).
// The user finds each under the id they were told (Service.Order follows aliases), and every
// one is counted. None is acknowledged without a row, an alias, a dead letter or a FAILED row.

// maxRehomeTries bounds the fresh ids drawn for one re-homed order: a fresh id can itself be
// taken only while the id counter is behind, which a rebuild corrects.
const maxRehomeTries = 3

// trace finds how each order of a voucher stands in the database: two queries for the rows
// under the orders' ids and the aliases from them, and one for where those aliases lead.
func (s *sqlStore) trace(ctx context.Context, voucherID int, orders []order) ([]trace, error) {
	return s.traceIn(ctx, s.db, voucherID, orders)
}

func (s *sqlStore) traceIn(ctx context.Context, c *ent.Client, voucherID int, orders []order) ([]trace, error) {
	ids := make([]int, len(orders))
	for i, o := range orders {
		ids[i] = int(o.id)
	}
	found, err := c.SeckillOrder.Query().Where(seckillorder.IDIn(ids...)).
		Select(seckillorder.FieldID, seckillorder.FieldUserID, seckillorder.FieldVoucherID, seckillorder.FieldStatus).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("seckill: reading orders: %w", err)
	}
	rows := make(map[int64]orderRow, len(found))
	for _, r := range found {
		rows[int64(r.ID)] = orderRow{user: r.UserID, voucher: r.VoucherID, failed: givenUp(r.Status)}
	}
	aliases, err := aliasesWhere(ctx, c, seckillorderalias.VoucherID(voucherID), seckillorderalias.AdmittedIDIn(ids...))
	if err != nil {
		return nil, fmt.Errorf("seckill: reading order aliases: %w", err)
	}
	byKey := make(map[aliasKey]aliasRow, len(aliases))
	for _, a := range aliases {
		byKey[a.from] = a.to
	}
	out := make([]trace, len(orders))
	for i, o := range orders {
		out[i] = classify(o, voucherID, rows, byKey)
	}
	return out, nil
}

// aliasesWhere reads the aliases that match, oldest first, with the status of the order each
// leads to; an alias whose order is missing is left out.
func aliasesWhere(ctx context.Context, c *ent.Client, where ...predicate.SeckillOrderAlias) ([]aliasRecord, error) {
	found, err := c.SeckillOrderAlias.Query().Where(where...).Order(ent.Asc(seckillorderalias.FieldID)).All(ctx)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	targets := make([]int, len(found))
	for i, a := range found {
		targets[i] = a.OrderID
	}
	statuses, err := c.SeckillOrder.Query().Where(seckillorder.IDIn(targets...)).
		Select(seckillorder.FieldID, seckillorder.FieldStatus).All(ctx)
	if err != nil {
		return nil, err
	}
	failed := make(map[int]bool, len(statuses))
	for _, o := range statuses {
		failed[o.ID] = givenUp(o.Status)
	}
	out := make([]aliasRecord, 0, len(found))
	for _, a := range found {
		isFailed, exists := failed[a.OrderID]
		if !exists {
			continue
		}
		out = append(out, aliasRecord{
			from: aliasKey{user: a.UserID, id: int64(a.AdmittedID)},
			to:   aliasRow{to: int64(a.OrderID), superseded: a.Reason == seckillorderalias.ReasonSUPERSEDED, failed: isFailed},
		})
	}
	return out, nil
}

// settleDuplicates sorts a batch some of whose rows were not inserted, by how each order
// stands in the database (see trace), writing what it takes in c's transaction: an order
// whose id belongs to another order is re-homed; one whose id is free but could not be
// inserted lost to the user's other order of the voucher and is superseded by it. moved
// counts the rows inserted under fresh ids, which take stock.
func (s *sqlStore) settleDuplicates(ctx context.Context, c *ent.Client, voucherID int, orders []order) (st settlement, moved int, err error) {
	traces, err := s.traceIn(ctx, c, voucherID, orders)
	if err != nil {
		return st, 0, err
	}
	for i, o := range orders {
		if st.place(o, traces[i]) {
			continue
		}
		r, err := s.rehome(ctx, c, voucherID, o, traces[i].standing == standsTaken)
		if err != nil {
			return st, 0, err
		}
		st.relinked = append(st.relinked, r)
		if r.superseded {
			st.superseded++
		} else {
			st.rehomed++
			moved++
		}
	}
	return st, moved, nil
}

// rehome settles, in c's transaction, an order that could not be inserted under its id: if
// the user holds a live order of the voucher, the order is superseded by it; otherwise, if its
// id is another order's (taken), it is stored under a fresh id. Either way an alias leads from
// the id the user was told to the order standing for it.
func (s *sqlStore) rehome(ctx context.Context, c *ent.Client, voucherID int, o order, taken bool) (relinked, error) {
	existing, err := liveOrderOf(ctx, c, o.user, voucherID)
	if err != nil {
		return relinked{}, err
	}
	if existing != 0 {
		s.log.Warn("order superseded by the user's existing order", "voucher", voucherID, "order", o.id, "existing", existing, "user", o.user)
		return relinked{order: o, to: existing, superseded: true},
			s.insertAlias(ctx, c, voucherID, o, existing, seckillorderalias.ReasonSUPERSEDED)
	}
	if !taken {
		return relinked{}, fmt.Errorf("seckill: order %d was neither inserted nor a duplicate", o.id)
	}
	id, err := s.freshRow(ctx, c, voucherID, o, seckillorder.StatusCREATED)
	if err != nil {
		return relinked{}, err
	}
	s.log.Error("order id already taken by another order (Redis lost the id counter): order re-homed under a fresh id",
		"voucher", voucherID, "order", o.id, "new_id", id, "user", o.user)
	return relinked{order: o, to: id}, nil
}

// freshRow inserts the order's row with a status under a fresh id, and an alias from its own
// id to it; it returns the fresh id.
func (s *sqlStore) freshRow(ctx context.Context, c *ent.Client, voucherID int, o order, status seckillorder.Status) (int64, error) {
	// Its id was issued twice: the counter lost counts. Raise fences it above that id first.
	if err := s.ids.Raise(ctx, o.id); err != nil {
		return 0, fmt.Errorf("seckill: raising the order id counter above %d: %w", o.id, err)
	}
	for try := 0; try < maxRehomeTries; try++ {
		id, err := s.ids.Next(ctx)
		if err != nil {
			return 0, fmt.Errorf("seckill: a fresh id for order %d: %w", o.id, err)
		}
		moved := o
		moved.id = id
		n, err := s.insertOrders(ctx, c, voucherID, []order{moved}, status)
		if err != nil {
			return 0, err
		}
		if n == 1 {
			return id, s.insertAlias(ctx, c, voucherID, o, id, seckillorderalias.ReasonREHOMED)
		}
	}
	return 0, fmt.Errorf("seckill: no free id for order %d after %d fresh ids", o.id, maxRehomeTries)
}

// liveOrderOf returns the user's live order of the voucher (the one holding the slot), or 0.
func liveOrderOf(ctx context.Context, c *ent.Client, userID, voucherID int) (int64, error) {
	ids, err := c.SeckillOrder.Query().
		Where(seckillorder.UserID(userID), seckillorder.VoucherID(voucherID), seckillorder.Slot(true)).IDs(ctx)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return int64(ids[len(ids)-1]), nil
}

// ensureFailed records an order FAILED unless it stands somewhere already (ensureGivenUp).
func (s *sqlStore) ensureFailed(ctx context.Context, c *ent.Client, voucherID int, o order, tr trace) (bool, error) {
	return s.ensureGivenUp(ctx, c, voucherID, o, tr, seckillorder.StatusFAILED)
}

// ensureGivenUp records an order with status (FAILED or LOST) unless it stands somewhere
// already: under its own id, or, if that id is another order's, under a fresh id that an
// alias leads to. It reports whether it wrote a record.
func (s *sqlStore) ensureGivenUp(ctx context.Context, c *ent.Client, voucherID int, o order, tr trace, status seckillorder.Status) (bool, error) {
	switch tr.standing {
	case standsNowhere:
		n, err := s.insertOrders(ctx, c, voucherID, []order{o}, status)
		return n == 1, err
	case standsTaken:
		_, err := s.freshRow(ctx, c, voucherID, o, status)
		return err == nil, err
	}
	return false, nil
}

// recordToldLost records LOST the orders told to their users that Redis lost before any
// consumer wrote them (see told.go), holding the voucher's row lock so that no batch commit
// lands meanwhile: those that stand nowhere in the database, checked again under the lock. It
// returns the orders it recorded.
func (s *sqlStore) recordToldLost(ctx context.Context, voucherID int, orders []order) ([]order, error) {
	var recorded []order
	err := s.inVoucherTx(ctx, voucherID, func(c *ent.Client) error {
		recorded = recorded[:0]
		traces, err := s.traceIn(ctx, c, voucherID, orders)
		if err != nil {
			return err
		}
		for i, o := range orders {
			wrote, err := s.ensureGivenUp(ctx, c, voucherID, o, traces[i], seckillorder.StatusLOST)
			if err != nil {
				return err
			}
			if wrote {
				recorded = append(recorded, o)
			}
		}
		return nil
	})
	return recorded, err
}

// recordFailed records an order given up on as FAILED (see ensureFailed), holding the
// voucher's row lock so that no batch commit lands meanwhile, and returns how it stood: an
// order that stands as a live order was persisted after all.
func (s *sqlStore) recordFailed(ctx context.Context, voucherID int, o order) (trace, error) {
	var tr trace
	err := s.inVoucherTx(ctx, voucherID, func(c *ent.Client) error {
		traces, err := s.traceIn(ctx, c, voucherID, []order{o})
		if err != nil {
			return err
		}
		tr = traces[0]
		_, err = s.ensureFailed(ctx, c, voucherID, o, tr)
		return err
	})
	return tr, err
}

// recordLost records FAILED the orders of a batch whose entries vanished from the stream
// while a consumer wrote them (Redis lost them: a flush, a restart without persistence, a
// failover): a rebuild may already have counted without them, so writing them now could
// oversell; dropping them would leave their users with an order id that leads nowhere. It
// checks again, holding the voucher's row lock, that each entry is gone (gone) and its order
// nowhere in the database, and returns how many it recorded.
func (s *sqlStore) recordLost(ctx context.Context, voucherID int, orders []order, gone func(context.Context) ([]bool, error)) (int, error) {
	recorded := 0
	err := s.inVoucherTx(ctx, voucherID, func(c *ent.Client) error {
		recorded = 0
		isGone, err := gone(ctx)
		if err != nil {
			return err
		}
		traces, err := s.traceIn(ctx, c, voucherID, orders)
		if err != nil {
			return err
		}
		for i, o := range orders {
			if !isGone[i] {
				continue
			}
			wrote, err := s.ensureFailed(ctx, c, voucherID, o, traces[i])
			if err != nil {
				return err
			}
			if wrote {
				recorded++
				s.log.Error("order lost with Redis's state while being written: recorded FAILED",
					"voucher", voucherID, "order", o.id, "user", o.user)
			}
		}
		return nil
	})
	return recorded, err
}
