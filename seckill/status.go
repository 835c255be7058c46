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
	"github.com/surgekit/surge/ent/seckillorderalias"
	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/redisctx"
)

// Order returns one of a user's orders, or (nil, nil) if the user has no such order. An
// order still queued in a stream comes back as an unsaved entity with status QUEUED, its
// voucher and user edges loaded. An order id the user was told that leads to an order under
// another id (re-homed or superseded after Redis lost state) returns that order. It returns at
// ctx's deadline whatever the Redis client's settings.
func (s *Service) Order(ctx context.Context, userID int, orderID int64) (*ent.SeckillOrder, error) {
	return redisctx.Do(ctx, s.rdb, func(ctx context.Context) (*ent.SeckillOrder, error) {
		return s.order(ctx, userID, orderID)
	})
}

func (s *Service) order(ctx context.Context, userID int, orderID int64) (*ent.SeckillOrder, error) {
	o, err := s.savedOrder(ctx, userID, orderID)
	if o != nil || err != nil {
		return o, err
	}
	queued, err := s.queuedOrders(ctx, userID)
	if err != nil {
		return nil, err
	}
	for _, q := range queued {
		if int64(q.ID) == orderID {
			return q, nil
		}
	}
	// The consumer may have written it between the two reads (it then left the queue).
	return s.savedOrder(ctx, userID, orderID)
}

// savedOrder returns the user's order in the database under orderID, or the one an alias
// from orderID leads to; nil if neither.
func (s *Service) savedOrder(ctx context.Context, userID int, orderID int64) (*ent.SeckillOrder, error) {
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

// QueuedOrders lists a user's orders admitted in Redis and not yet in the database, as
// unsaved entities with status QUEUED, newest first. It reads the buyers of the vouchers
// whose stream is not empty (one pipelined round trip for the lengths, one for the buyers).
// It returns at ctx's deadline whatever the Redis client's settings.
func (s *Service) QueuedOrders(ctx context.Context, userID int) ([]*ent.SeckillOrder, error) {
	return redisctx.Do(ctx, s.rdb, func(ctx context.Context) ([]*ent.SeckillOrder, error) {
		return s.queuedOrders(ctx, userID)
	})
}

func (s *Service) queuedOrders(ctx context.Context, userID int) ([]*ent.SeckillOrder, error) {
	if s.opts.Strategy == StrategySync {
		return nil, nil
	}
	ids, err := s.rdb.ZRevRange(ctx, s.registryKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("seckill: listing vouchers: %w", err)
	}
	vouchers := make([]int, 0, len(ids))
	for _, id := range ids {
		if v, err := strconv.Atoi(id); err == nil {
			vouchers = append(vouchers, v)
		}
	}
	lens := make([]*redis.IntCmd, len(vouchers))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, v := range vouchers {
			lens[i] = p.XLen(ctx, s.keys(v).Orders)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("seckill: reading queues: %w", err)
	}
	var busy []int
	for i, v := range vouchers {
		if n, _ := lens[i].Result(); n > 0 {
			busy = append(busy, v)
		}
	}
	if len(busy) == 0 {
		return nil, nil
	}
	got := make([]*redis.StringCmd, len(busy))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, v := range busy {
			got[i] = p.HGet(ctx, s.keys(v).Buyers, strconv.Itoa(userID))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("seckill: reading buyers: %w", err)
	}
	candidates := map[int]int{} // order id -> voucher id
	var orderIDs []int
	for i, v := range busy {
		id, err := got[i].Int()
		if err == nil && id > 0 {
			candidates[id] = v
			orderIDs = append(orderIDs, id)
		}
	}
	if len(orderIDs) == 0 {
		return nil, nil
	}
	// Buyers stay in the hash once persisted: only those not in the database (for this user:
	// after Redis lost its id counter another user's order can have the same id) are queued.
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
	for _, id := range append(saved, aliased...) {
		delete(candidates, id)
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	user, err := s.db.User.Get(ctx, userID)
	if err != nil {
		return nil, err
	}
	var out []*ent.SeckillOrder
	for _, id := range orderIDs {
		v, ok := candidates[id]
		if !ok {
			continue
		}
		vo, err := s.db.Voucher.Get(ctx, v)
		if err != nil {
			return nil, err
		}
		o := queuedOrder(int64(id), userID, v)
		o.Edges.User, o.Edges.Voucher = user, vo
		out = append(out, o)
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

// Stock returns the units a voucher has left for admission: Redis's count with StrategyLua
// (ErrNotReady if Redis does not hold it), the database's with StrategySync. It returns at
// ctx's deadline whatever the Redis client's settings.
func (s *Service) Stock(ctx context.Context, voucherID int) (int, error) {
	if s.opts.Strategy == StrategySync {
		v, err := s.db.Voucher.Get(ctx, voucherID)
		if ent.IsNotFound(err) || (err == nil && v.Stock == nil) {
			return 0, ErrNoSuchVoucher
		}
		if err != nil {
			return 0, err
		}
		return *v.Stock, nil
	}
	n, err := redisctx.Do(ctx, s.rdb, func(ctx context.Context) (int, error) {
		return s.rdb.Get(ctx, s.keys(voucherID).Stock).Int()
	})
	if errors.Is(err, redis.Nil) {
		return 0, ErrNotReady
	}
	return n, err
}
