package seckill

import (
	"context"

	"github.com/surgekit/surge/lua"
)

// refStore is the order store as the parts that handle bucket references see it (buckets.go):
// the consumer, the settler, recovery and told pass a bucket's reference where they pass a
// voucher id, and the database knows only the voucher. Every bucket's batches then commit under
// the voucher's row lock, which a rebuild holds.
type refStore struct{ orderStore }

func (s refStore) guardCommits(ctx context.Context, ref int) (context.Context, func(), error) {
	return s.orderStore.guardCommits(ctx, voucherOf(ref))
}

func (s refStore) writeBatch(ctx context.Context, ref int, orders []order, mine func(context.Context) error) (settlement, error) {
	return s.orderStore.writeBatch(ctx, voucherOf(ref), orders, mine)
}

func (s refStore) recordFailed(ctx context.Context, ref int, o order) (trace, error) {
	return s.orderStore.recordFailed(ctx, voucherOf(ref), o)
}

func (s refStore) recordLost(ctx context.Context, ref int, orders []order, gone func(context.Context) ([]bool, error)) (int, error) {
	return s.orderStore.recordLost(ctx, voucherOf(ref), orders, gone)
}

func (s refStore) recordToldLost(ctx context.Context, ref int, orders []order) ([]order, error) {
	return s.orderStore.recordToldLost(ctx, voucherOf(ref), orders)
}

func (s refStore) trace(ctx context.Context, ref int, orders []order) ([]trace, error) {
	return s.orderStore.trace(ctx, voucherOf(ref), orders)
}

func (s refStore) writeGang(ctx context.Context, batches []gangBatch, mine func(context.Context) error) ([]settlement, error) {
	byVoucher := make([]gangBatch, len(batches))
	for i, b := range batches {
		b.voucherID = voucherOf(b.voucherID)
		byVoucher[i] = b
	}
	return s.orderStore.writeGang(ctx, byVoucher, mine)
}

func (s refStore) holdVoucher(ctx context.Context, ref int) (orderStore, func(), error) {
	held, release, err := s.orderStore.holdVoucher(ctx, voucherOf(ref))
	if err != nil {
		return nil, nil, err
	}
	return refStore{held}, release, nil
}

func (s refStore) sale(ctx context.Context, ref int) (sale, error) {
	return s.orderStore.sale(ctx, voucherOf(ref))
}

func (s refStore) buyers(ctx context.Context, ref int, after int64, limit int) ([]lua.Buyer, error) {
	return s.orderStore.buyers(ctx, voucherOf(ref), after, limit)
}
