package seckill

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"time"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/seckillorderalias"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/lua"
)

func (s *sqlStore) isSeckill(ctx context.Context, voucherID int) (bool, error) {
	v, err := s.db.Voucher.Get(ctx, voucherID)
	if ent.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return v.Kind == voucher.KindSECKILL, nil
}

func (s *sqlStore) sale(ctx context.Context, voucherID int) (sale, error) {
	v, err := s.db.Voucher.Get(ctx, voucherID)
	if ent.IsNotFound(err) {
		return sale{}, ErrNoSuchVoucher
	}
	if err != nil {
		return sale{}, fmt.Errorf("seckill: reading voucher %d: %w", voucherID, err)
	}
	if v.Kind != voucher.KindSECKILL || v.Stock == nil || v.BeginAt == nil || v.EndAt == nil {
		return sale{}, ErrNoSuchVoucher
	}
	return sale{status: v.Status, stock: *v.Stock, begin: *v.BeginAt, end: *v.EndAt, buckets: max(v.Buckets, 1)}, nil
}

func (s *sqlStore) vouchersOnSale(ctx context.Context, now time.Time) ([]int, error) {
	return s.db.Voucher.Query().
		Where(voucher.KindEQ(voucher.KindSECKILL), voucher.StatusEQ(voucher.StatusACTIVE), voucher.EndAtGT(now)).
		IDs(ctx)
}

func (s *sqlStore) vouchersEndingAfter(ctx context.Context, t time.Time) ([]int, error) {
	return s.db.Voucher.Query().Where(voucher.KindEQ(voucher.KindSECKILL), voucher.EndAtGT(t)).IDs(ctx)
}

func (s *sqlStore) maxOrderID(ctx context.Context) (int64, error) {
	var orders, aliases []struct {
		Max stdsql.NullInt64 `json:"max"`
	}
	if err := s.db.SeckillOrder.Query().Aggregate(ent.Max(seckillorder.FieldID)).Scan(ctx, &orders); err != nil {
		return 0, err
	}
	if err := s.db.SeckillOrderAlias.Query().Aggregate(ent.Max(seckillorderalias.FieldAdmittedID)).Scan(ctx, &aliases); err != nil {
		return 0, err
	}
	var top int64
	for _, m := range append(orders, aliases...) {
		top = max(top, m.Max.Int64)
	}
	return top, nil
}

func (s *sqlStore) buyers(ctx context.Context, voucherID int, after int64, limit int) ([]lua.Buyer, error) {
	rows, err := s.db.SeckillOrder.Query().
		Where(seckillorder.VoucherID(voucherID), seckillorder.Slot(true), seckillorder.IDGT(int(after))).
		Order(ent.Asc(seckillorder.FieldID)).Limit(limit).
		Select(seckillorder.FieldID, seckillorder.FieldUserID).All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]lua.Buyer, len(rows))
	for i, o := range rows {
		out[i] = lua.Buyer{User: o.UserID, Order: int64(o.ID)}
	}
	return out, nil
}

func (s *sqlStore) savedOrder(ctx context.Context, userID int, orderID int64) (*ent.SeckillOrder, error) {
	byID := func(id int) (*ent.SeckillOrder, error) {
		o, err := s.db.SeckillOrder.Query().Where(seckillorder.ID(id), seckillorder.UserID(userID)).Only(ctx)
		if ent.IsNotFound(err) {
			return nil, nil
		}
		return o, err
	}
	o, err := byID(int(orderID))
	if o != nil || err != nil {
		return o, err
	}
	a, err := s.db.SeckillOrderAlias.Query().
		Where(seckillorderalias.UserID(userID), seckillorderalias.AdmittedID(int(orderID))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return byID(a.OrderID)
}

func (s *sqlStore) issued(ctx context.Context, orderID int64) (bool, error) {
	ok, err := s.db.SeckillOrder.Query().Where(seckillorder.ID(int(orderID))).Exist(ctx)
	if ok || err != nil {
		return ok, err
	}
	return s.db.SeckillOrderAlias.Query().Where(seckillorderalias.AdmittedID(int(orderID))).Exist(ctx)
}

func (s *sqlStore) unsaved(ctx context.Context, userID int, orderIDs []int) ([]int, error) {
	saved, err := s.db.SeckillOrder.Query().Where(seckillorder.IDIn(orderIDs...), seckillorder.UserID(userID)).IDs(ctx)
	if err != nil {
		return nil, err
	}
	aliased, err := s.db.SeckillOrderAlias.Query().
		Where(seckillorderalias.UserID(userID), seckillorderalias.AdmittedIDIn(orderIDs...)).
		Select(seckillorderalias.FieldAdmittedID).Ints(ctx)
	if err != nil {
		return nil, err
	}
	known := make(map[int]bool, len(saved)+len(aliased))
	for _, id := range append(saved, aliased...) {
		known[id] = true
	}
	var out []int
	for _, id := range orderIDs {
		if !known[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

func (s *sqlStore) queued(ctx context.Context, userID int, ids []int, voucherOf map[int]int) ([]*ent.SeckillOrder, error) {
	user, err := s.db.User.Get(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]*ent.SeckillOrder, 0, len(ids))
	for _, id := range ids {
		v := voucherOf[id]
		vo, err := s.db.Voucher.Get(ctx, v)
		if err != nil {
			return nil, err
		}
		o := queuedOrder(int64(id), userID, v)
		o.Edges.User, o.Edges.Voucher = user, vo
		out = append(out, o)
	}
	return out, nil
}

func (s *sqlStore) stock(ctx context.Context, voucherID int) (int, error) {
	v, err := s.db.Voucher.Get(ctx, voucherID)
	if ent.IsNotFound(err) || (err == nil && v.Stock == nil) {
		return 0, ErrNoSuchVoucher
	}
	if err != nil {
		return 0, err
	}
	return *v.Stock, nil
}

// reconcilePage is how many orders eachOrder reads at once.
const reconcilePage = 5000

func (s *sqlStore) eachOrder(ctx context.Context, voucherID int, fn func(orderRecord)) error {
	last := 0
	for {
		rows, err := s.db.SeckillOrder.Query().
			Where(seckillorder.VoucherID(voucherID), seckillorder.IDGT(last)).
			Order(ent.Asc(seckillorder.FieldID)).Limit(reconcilePage).
			Select(seckillorder.FieldID, seckillorder.FieldUserID, seckillorder.FieldStatus, seckillorder.FieldSlot).
			All(ctx)
		if err != nil {
			return err
		}
		for _, r := range rows {
			fn(orderRecord{id: int64(r.ID), user: r.UserID, failed: givenUp(r.Status), lost: r.Status == seckillorder.StatusLOST, slot: r.Slot != nil && *r.Slot})
		}
		if len(rows) < reconcilePage {
			return nil
		}
		last = rows[len(rows)-1].ID
	}
}

func (s *sqlStore) aliases(ctx context.Context, voucherID int) ([]aliasRecord, error) {
	return aliasesWhere(ctx, s.db, seckillorderalias.VoucherID(voucherID))
}
