package seckill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/idgen"
)

// statusReader reads where a user's orders stand: in the database (orderReader), or still
// queued in Redis.
type statusReader struct {
	strategy Strategy
	rdb      redis.UniversalClient
	keys     keyspace
	store    orderReader
	ids      *idgen.Generator // its latest durable fence tells ids issued before a loss
	counts   *bucketCounts    // a user's buyer record is in the user's own bucket (buckets.go)
}

func (sr *statusReader) order(ctx context.Context, userID int, orderID int64) (*ent.SeckillOrder, error) {
	o, err := sr.store.savedOrder(ctx, userID, orderID)
	if o != nil || err != nil {
		return o, err
	}
	queued, err := sr.queuedOrders(ctx, userID)
	if err != nil {
		return nil, err
	}
	for _, q := range queued {
		if int64(q.ID) == orderID {
			return q, nil
		}
	}
	// The consumer may have written it between the two reads (it then left the queue).
	if o, err := sr.store.savedOrder(ctx, userID, orderID); o != nil || err != nil {
		return o, err
	}
	return nil, sr.lost(ctx, orderID)
}

// lost tells an order id that no order has, issued before the id counter's latest durable
// fence (ErrOrderLost), from one that may be yet to come or was never issued (nil). Every
// order told stands in the database (a row, an alias, a FAILED or LOST row) or in a stream
// unless Redis lost it; the fence that follows a loss is recorded before any later id is
// issued, so an id before it that stands nowhere now never will. An order this process told
// is recorded LOST (told.go); this answers for those whose process is gone.
func (sr *statusReader) lost(ctx context.Context, orderID int64) error {
	if sr.strategy == StrategySync || !idgen.IsGenerated(orderID) {
		return nil
	}
	fence, err := sr.ids.LatestFence(ctx)
	if err != nil || fence.IsZero() {
		return err
	}
	if at, _ := idgen.Decompose(orderID); !at.Before(fence) {
		return nil
	}
	issued, err := sr.store.issued(ctx, orderID)
	if err != nil || issued {
		return err
	}
	return ErrOrderLost
}

func (sr *statusReader) queuedOrders(ctx context.Context, userID int) ([]*ent.SeckillOrder, error) {
	if sr.strategy == StrategySync {
		return nil, nil
	}
	busy, err := sr.vouchersWithQueue(ctx)
	if err != nil || len(busy) == 0 {
		return nil, err
	}
	voucherOf, ids, err := sr.buyerOrders(ctx, userID, busy)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	// Buyers stay in the hash once persisted: only those not in the database (for this user:
	// after Redis lost its id counter another user's order can have the same id) are queued.
	if ids, err = sr.store.unsaved(ctx, userID, ids); err != nil || len(ids) == 0 {
		return nil, err
	}
	out, err := sr.store.queued(ctx, userID, ids, voucherOf)
	if err != nil {
		return nil, err
	}
	// The registry lists vouchers by the end of their sale, not the orders by age.
	slices.SortFunc(out, func(a, b *ent.SeckillOrder) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out, nil
}

// vouchersWithQueue lists the registered vouchers whose stream is not empty (one pipelined
// round trip for the lengths).
func (sr *statusReader) vouchersWithQueue(ctx context.Context) ([]int, error) {
	members, err := sr.rdb.ZRevRange(ctx, sr.keys.registry(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("seckill: listing vouchers: %w", err)
	}
	vouchers := make([]int, 0, len(members))
	for _, id := range members {
		if v, err := strconv.Atoi(id); err == nil {
			vouchers = append(vouchers, v) // or a stock bucket's reference (buckets.go)
		}
	}
	lens := make([]*redis.IntCmd, len(vouchers))
	if _, err := sr.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, v := range vouchers {
			lens[i] = p.XLen(ctx, sr.keys.sale(v).Orders)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("seckill: reading queues: %w", err)
	}
	var busy []int
	seen := map[int]bool{}
	for i, v := range vouchers {
		if n, _ := lens[i].Result(); n > 0 && !seen[voucherOf(v)] {
			seen[voucherOf(v)] = true
			busy = append(busy, voucherOf(v))
		}
	}
	return busy, nil
}

// buyerOrders reads the user's order of each voucher from the buyers hashes (one pipelined
// round trip): order id -> voucher id, and the order ids in the vouchers' order.
func (sr *statusReader) buyerOrders(ctx context.Context, userID int, vouchers []int) (map[int]int, []int, error) {
	got := make([]*redis.StringCmd, len(vouchers))
	homes := make([]int, len(vouchers))
	for i, v := range vouchers {
		k, err := sr.counts.of(ctx, v)
		if err != nil {
			return nil, nil, fmt.Errorf("seckill: reading buckets: %w", err)
		}
		homes[i] = bucketRef(v, homeBucket(userID, k), k)
	}
	if _, err := sr.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range vouchers {
			got[i] = p.HGet(ctx, sr.keys.sale(homes[i]).Buyers, strconv.Itoa(userID))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("seckill: reading buyers: %w", err)
	}
	voucherOf := map[int]int{}
	var ids []int
	for i, v := range vouchers {
		id, err := got[i].Int()
		if err == nil && id > 0 {
			voucherOf[id] = v
			ids = append(ids, id)
		}
	}
	return voucherOf, ids, nil
}

// stock is the database's stock, for StrategySync.
func (sr *statusReader) stock(ctx context.Context, voucherID int) (int, error) {
	return sr.store.stock(ctx, voucherID)
}

// queuedOrder is an order admitted in Redis and not yet in the database, as the API shows it:
// an unsaved entity with status QUEUED, created when its id was issued.
func queuedOrder(id int64, userID, voucherID int) *ent.SeckillOrder {
	at, _ := idgen.Decompose(id)
	return &ent.SeckillOrder{ID: int(id), UserID: userID, VoucherID: voucherID, Status: seckillorder.StatusQUEUED, CreatedAt: at, UpdatedAt: at}
}

// AdmittedOrder is the order a successful grab of userID on voucherID made, as the grab left
// it: QUEUED, or CREATED with StrategySync. It reads neither Redis nor the database: a grab must
// not turn into a failure because a read after it failed. Its edges are not loaded; read the
// voucher and user by VoucherID and UserID (a QUEUED order has no row to join them from).
// Service.Order gives its current status.
func AdmittedOrder(userID, voucherID int, a Admission) *ent.SeckillOrder {
	o := queuedOrder(a.OrderID, userID, voucherID)
	if a.Status == StatusCreated {
		o.Status = seckillorder.StatusCREATED
		o.CreatedAt, o.UpdatedAt = a.createdAt, a.createdAt
	}
	return o
}
