package seckill

import (
	"context"
	"fmt"
	"time"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/lock"
)

// The per-user lock of the synchronous strategy: its lease bounds how long a grab whose process
// died blocks that user's next grab; a user's concurrent grabs wait at most userLockWait.
const (
	userLockLease = 10 * time.Second
	userLockWait  = 5 * time.Second
)

// grabSync is the synchronous strategy: under the user's lock, one transaction checks the
// voucher and the user's existing order, decrements the stock only while it is positive and
// inserts the order. The lock keeps one user's concurrent grabs from racing to the database;
// the unique (user, voucher) index would catch them anyway.
func (s *Service) grabSync(ctx context.Context, userID, voucherID int) (Admission, error) {
	l, err := s.locks.Obtain(ctx, s.userLockName(userID), lock.LockOptions{Lease: userLockLease, Wait: userLockWait})
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: locking user %d: %w", userID, err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	ctx = l.Context()

	tx, err := s.db.Tx(ctx)
	if err != nil {
		return Admission{}, err
	}
	a, err := s.grabInTx(ctx, tx, userID, voucherID)
	if err != nil {
		_ = tx.Rollback()
		return a, err
	}
	return a, tx.Commit()
}

func (s *Service) grabInTx(ctx context.Context, tx *ent.Tx, userID, voucherID int) (Admission, error) {
	v, err := tx.Voucher.Get(ctx, voucherID)
	if ent.IsNotFound(err) {
		return Admission{}, ErrNoSuchVoucher
	}
	if err != nil {
		return Admission{}, err
	}
	if v.Kind != voucher.KindSECKILL || v.BeginAt == nil || v.EndAt == nil {
		return Admission{}, ErrNoSuchVoucher
	}
	now := s.opts.Clock()
	switch {
	case v.Status != voucher.StatusACTIVE || !now.Before(*v.EndAt):
		return Admission{}, ErrEnded
	case now.Before(*v.BeginAt):
		return Admission{}, ErrNotStarted
	}
	prev, err := tx.SeckillOrder.Query().
		Where(seckillorder.UserID(userID), seckillorder.VoucherID(voucherID), seckillorder.Slot(true)).
		Select(seckillorder.FieldID).First(ctx)
	if err == nil {
		return Admission{OrderID: int64(prev.ID), Status: StatusCreated}, ErrAlreadyPurchased
	}
	if !ent.IsNotFound(err) {
		return Admission{}, err
	}
	if v.Stock == nil || *v.Stock <= 0 {
		// A plain read suffices to refuse: the stock only goes down during a sale, and not
		// taking the row lock keeps the sold-out flood from queueing behind the buyers.
		return Admission{}, ErrSoldOut
	}
	n, err := tx.Voucher.Update().Where(voucher.ID(voucherID), voucher.StockGT(0)).AddStock(-1).Save(ctx)
	if err != nil {
		return Admission{}, err
	}
	if n == 0 {
		return Admission{}, ErrSoldOut
	}
	id, err := s.ids.Next(ctx)
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: order id: %w", err)
	}
	err = tx.SeckillOrder.Create().SetID(int(id)).SetUserID(userID).SetVoucherID(voucherID).
		SetStatus(seckillorder.StatusCREATED).SetSlot(true).SetCreatedAt(createdAt(now)).Exec(ctx)
	if ent.IsConstraintError(err) {
		return Admission{}, ErrAlreadyPurchased
	}
	if err != nil {
		return Admission{}, err
	}
	return Admission{OrderID: id, Status: StatusCreated, createdAt: createdAt(now)}, nil
}

// createdAt is the created_at stored for an order made at t: whole seconds, what MySQL's
// TIMESTAMP column keeps (MariaDB truncates, MySQL rounds), so that the grab's answer and a
// later read agree.
func createdAt(t time.Time) time.Time { return t.Truncate(time.Second) }
