package seckill_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // the "sqlite" driver, pure Go

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/seckill"
)

// A flash sale end to end: three buyers, two units. Grabs are decided in Redis at once; the
// consumer writes the admitted orders to the database. Needs Redis on 127.0.0.1:6379; the
// database here is an in-memory SQLite (surge runs the same code on MySQL).
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	sqlDB, err := sql.Open("sqlite", "file:seckill-example?mode=memory&cache=shared&_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer sqlDB.Close()
	db := ent.NewClient(ent.Driver(entsql.OpenDB("sqlite3", sqlDB)))
	if err := db.Schema.Create(ctx); err != nil {
		panic(err)
	}

	// A seckill voucher with stock 2, on sale now, and three buyers.
	typ := db.ShopType.Create().SetName("Tea").SetSort(1).SaveX(ctx)
	shop := db.Shop.Create().SetName("Tea House").SetTypeID(typ.ID).SetLongitude(120.1).SetLatitude(30.2).SetImages([]string{}).SaveX(ctx)
	v := db.Voucher.Create().SetShopID(shop.ID).SetTitle("50% off").SetPayValue(500).SetActualValue(1000).
		SetKind("SECKILL").SetStock(2).SetBeginAt(time.Now().Add(-time.Minute)).SetEndAt(time.Now().Add(time.Hour)).SaveX(ctx)
	var buyers []int
	for _, phone := range []string{"13800000001", "13800000002", "13800000003"} {
		buyers = append(buyers, db.User.Create().SetPhone(phone).SetNickname("buyer").SaveX(ctx).ID)
	}

	// A namespace of its own, so the example never meets another deployment's keys.
	ns := fmt.Sprintf("example-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns+":*") // an example cleans up; a deployment keeps its keys
	sale, err := seckill.New(db, rdb, seckill.Options{Namespace: ns, Dialect: "sqlite3", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer sale.Close()
	if err := sale.Warm(ctx, v.ID); err != nil { // the sale's state into Redis
		panic(err)
	}
	consumerCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	go sale.RunConsumer(consumerCtx) // orders from the Redis stream into the database

	var admitted []seckill.Admission
	for i, user := range buyers {
		a, err := sale.Grab(ctx, user, v.ID)
		var refusal *seckill.Refusal
		switch {
		case errors.As(err, &refusal):
			fmt.Printf("buyer %d: refused, %s\n", i+1, refusal.Reason())
		case err != nil:
			panic(err)
		default:
			fmt.Printf("buyer %d: %s\n", i+1, a.Status)
			admitted = append(admitted, a)
		}
	}
	for i, a := range admitted { // the consumer persists them within milliseconds
		for {
			o, err := sale.Order(ctx, buyers[i], a.OrderID)
			if err != nil {
				panic(err)
			}
			if o != nil && o.Status == seckillorder.StatusCREATED {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Println("orders in the database:", db.SeckillOrder.Query().CountX(ctx))
	// Output:
	// buyer 1: QUEUED
	// buyer 2: QUEUED
	// buyer 3: refused, sold_out
	// orders in the database: 2
}

func deleteKeys(rdb *redis.Client, pattern string) {
	ctx := context.Background()
	for it := rdb.Scan(ctx, 0, pattern, 1000).Iterator(); it.Next(ctx); {
		rdb.Unlink(ctx, it.Val())
	}
}
