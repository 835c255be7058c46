package lua

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

// TestMoveBucketStock: additions go in whole, takes stop at the stock there is, a bucket with
// no stock takes nothing in (only a rebuild makes it ready), and past its deadline the script
// changes nothing.
func TestMoveBucketStock(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		keys := testSaleKeys(t, rdb)
		soon := time.Now().Add(time.Minute)
		if n, err := MoveBucketStock(ctx, rdb, keys, 5, soon); err != nil || n != 0 || rdb.Exists(ctx, keys.Stock).Val() != 0 {
			t.Fatalf("adding to a bucket with no stock: moved %d, %v; key exists %d", n, err, rdb.Exists(ctx, keys.Stock).Val())
		}
		rdb.Set(ctx, keys.Stock, 3, time.Minute)
		for _, c := range []struct{ units, moved, stock int64 }{{4, 4, 7}, {-2, -2, 5}, {-9, -5, 0}, {-1, 0, 0}, {0, 0, 0}} {
			n, err := MoveBucketStock(ctx, rdb, keys, c.units, soon)
			if s, _ := rdb.Get(ctx, keys.Stock).Int64(); err != nil || n != c.moved || s != c.stock {
				t.Fatalf("moving %d: moved %d, %v, stock %d; want %d, stock %d", c.units, n, err, s, c.moved, c.stock)
			}
		}
		if n, err := MoveBucketStock(ctx, rdb, keys, 5, time.Now().Add(-time.Second)); !errors.Is(err, ErrCommitTooLate) || n != 0 || rdb.Get(ctx, keys.Stock).Val() != "0" {
			t.Fatalf("past the deadline: moved %d, %v, stock %s", n, err, rdb.Get(ctx, keys.Stock).Val())
		}
	})
}

// TestWarmRefreshKeepsTheStock: a refresh sets the window and returns the stock and queue as
// they are, an update sets the stock; on a sale Redis lost (no meta or no stock) neither writes.
func TestWarmRefreshKeepsTheStock(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		keys := testSaleKeys(t, rdb)
		now := time.Now()
		sale := Sale{Begin: now.Add(-time.Minute), End: now.Add(time.Hour), On: true, Stock: 100, Retention: time.Minute}
		soon := now.Add(time.Minute)
		if _, _, err := WarmRefresh(ctx, rdb, keys, sale, soon); !errors.Is(err, ErrSaleNotReady) {
			t.Fatalf("refresh of a sale never warmed: %v", err)
		}
		if n := rdb.Exists(ctx, keys.Meta, keys.Stock).Val(); n != 0 {
			t.Fatalf("a refused refresh wrote %d keys", n)
		}
		if _, err := WarmCommit(ctx, rdb, keys, sale, true, soon); err != nil {
			t.Fatal(err)
		}
		rdb.DecrBy(ctx, keys.Stock, 2)
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Orders, Values: []any{"o", 1, "u", 1, "t", 1}})
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Orders, Values: []any{"o", 2, "u", 2, "t", 1}})
		sale.On, sale.Stock = false, 7
		stock, queued, err := WarmRefresh(ctx, rdb, keys, sale, soon)
		if err != nil || stock != 98 || queued != 2 || rdb.Get(ctx, keys.Stock).Val() != "98" || rdb.HGet(ctx, keys.Meta, "on").Val() != "0" {
			t.Fatalf("refresh: stock %d, queued %d, %v; stock key %s, on %s; want 98, 2, on 0",
				stock, queued, err, rdb.Get(ctx, keys.Stock).Val(), rdb.HGet(ctx, keys.Meta, "on").Val())
		}
		if n, err := WarmUpdate(ctx, rdb, keys, sale, soon); err != nil || n != 5 || rdb.Get(ctx, keys.Stock).Val() != "5" {
			t.Fatalf("update: stock %d, %v; want 7 less the 2 queued", n, err)
		}
		rdb.Del(ctx, keys.Meta)
		if _, _, err := WarmRefresh(ctx, rdb, keys, sale, soon); !errors.Is(err, ErrSaleNotReady) || rdb.Exists(ctx, keys.Meta).Val() != 0 {
			t.Fatalf("refresh of a sale whose meta is lost: %v, meta exists %d", err, rdb.Exists(ctx, keys.Meta).Val())
		}
		if _, err := WarmUpdate(ctx, rdb, keys, sale, soon); !errors.Is(err, ErrSaleNotReady) || rdb.Exists(ctx, keys.Meta).Val() != 0 {
			t.Fatalf("update of a sale whose meta is lost: %v, meta exists %d", err, rdb.Exists(ctx, keys.Meta).Val())
		}
	})
}
