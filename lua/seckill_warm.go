package lua

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// seckillWarmReset starts a full rebuild of a voucher's admission state (admission pauses).
	seckillWarmReset = load("seckill_warm_reset.lua")
	// seckillWarmBuyers adds one batch of buyers during a rebuild.
	seckillWarmBuyers = load("seckill_warm_buyers.lua")
	// seckillWarmCommit sets a voucher's window and stock (database stock minus the stream's
	// backlog) and makes it ready.
	seckillWarmCommit = load("seckill_warm_commit.lua")
)

// WarmReset starts a full rebuild of a voucher's sale state (seckill_warm_reset.lua): the meta
// hash goes, so admission answers not ready until WarmCommit, and the buyers are cleared.
func WarmReset(ctx context.Context, rdb redis.Scripter, keys SeckillKeys) error {
	return seckillWarmReset.Run(ctx, rdb, []string{keys.Meta, keys.Buyers}).Err()
}

// Buyer is one user's live order of a voucher.
type Buyer struct {
	User  int
	Order int64
}

// WarmBuyers adds buyers to a voucher's buyers hash during a rebuild (seckill_warm_buyers.lua).
func WarmBuyers(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, buyers []Buyer) error {
	if len(buyers) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(buyers))
	for _, b := range buyers {
		args = append(args, b.User, b.Order)
	}
	return seckillWarmBuyers.Run(ctx, rdb, []string{keys.Buyers}, args...).Err()
}

// Sale is what WarmCommit sets: the database's view of a voucher's sale.
type Sale struct {
	Begin, End time.Time
	On         bool  // the voucher is ACTIVE
	Stock      int64 // the database's stock
	// Retention is how long the sale's keys outlive its end (or the commit, for a sale
	// already over): they expire then. Zero keeps them a week.
	Retention time.Duration
}

// ErrCommitTooLate is WarmCommit's answer when Redis ran it after notAfter: nothing written.
var ErrCommitTooLate = errors.New("lua: seckill warm commit ran after its deadline; nothing written")

// WarmCommit sets a voucher's window, on/off and stock (sale.Stock minus the orders still in
// the stream, computed in the script so that no admission slips in between) and makes the
// sale ready (seckill_warm_commit.lua). With rebuild the stream's buyers are added back and
// the state is marked current for the running Redis process (see SaleState). Redis runs it
// only until notAfter by its own clock (ErrCommitTooLate): the caller's database read is
// trusted until then. It returns the stock set.
func WarmCommit(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, sale Sale, rebuild bool, notAfter time.Time) (int64, error) {
	stock, _, err := WarmCommitQueued(ctx, rdb, keys, sale, rebuild, notAfter)
	return stock, err
}

// WarmCommitQueued is WarmCommit that also returns how many orders the stream held: where
// that is more than sale.Stock, the stock set is 0 and the excess is the caller's to take
// from other buckets of the voucher (seckill/buckets.go).
func WarmCommitQueued(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, sale Sale, rebuild bool, notAfter time.Time) (stock, queued int64, err error) {
	return warmCommit(ctx, rdb, keys, sale, rebuild, "set", notAfter)
}

// ErrSaleNotReady is WarmUpdate's and WarmRefresh's answer for a sale Redis does not hold (its
// meta or stock lost): nothing written; only a rebuild may bring it back, with its buyers.
var ErrSaleNotReady = errors.New("lua: seckill sale not ready in Redis; nothing written")

// WarmUpdate is WarmCommit without rebuild for a sale that is ready: ErrSaleNotReady if Redis
// lost it since the caller looked, instead of making it ready again without its buyers.
func WarmUpdate(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, sale Sale, notAfter time.Time) (int64, error) {
	stock, _, err := warmCommit(ctx, rdb, keys, sale, false, "update", notAfter)
	return stock, err
}

// WarmRefresh is WarmCommitQueued for a sale that is ready, leaving its stock as it is: it sets
// the window and on/off and returns the stock and the orders queued (seckill_warm_commit.lua
// with keep). sale.Stock is not used. ErrSaleNotReady if the sale is not ready.
func WarmRefresh(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, sale Sale, notAfter time.Time) (stock, queued int64, err error) {
	return warmCommit(ctx, rdb, keys, sale, false, "keep", notAfter)
}

func warmCommit(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, sale Sale, rebuild bool, mode string, notAfter time.Time) (stock, queued int64, err error) {
	res, err := seckillWarmCommit.Run(ctx, rdb, []string{keys.Meta, keys.Stock, keys.Buyers, keys.Orders},
		sale.Begin.UnixMilli(), sale.End.UnixMilli(), flag(sale.On), sale.Stock, flag(rebuild), notAfter.UnixMilli(),
		cmp.Or(sale.Retention, 7*24*time.Hour).Milliseconds(), mode).Int64Slice()
	switch {
	case err != nil:
		return 0, 0, err
	case len(res) != 2:
		return 0, 0, malformed("seckill_warm_commit.lua", res)
	case res[0] == -1:
		return 0, 0, ErrCommitTooLate
	case res[0] == -2:
		return 0, 0, ErrSaleNotReady
	}
	return res[0], res[1], nil
}
