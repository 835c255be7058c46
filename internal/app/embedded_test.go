package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/seckill"
)

func embedded(t *testing.T) *App {
	t.Helper()
	cfg, err := ParseConfig([]string{"-data-dir", t.TempDir()}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// miniredis never expires keys on its own; the ticker must, or codes and sessions live forever.
func TestEmbeddedRedisExpiresKeys(t *testing.T) {
	a := embedded(t)
	ctx := context.Background()
	if err := a.Redis.Set(ctx, "probe", "x", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for a.Redis.Exists(ctx, "probe").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("a 300 ms key still exists after 3 s: embedded expiry is not driven")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SQLite needs WAL and a busy timeout for concurrent writers; without them most fail with
// SQLITE_BUSY. Twenty first-time logins at once each create a user row.
func TestEmbeddedConcurrentLogins(t *testing.T) {
	a := embedded(t)
	ctx := context.Background()
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			phone := fmt.Sprintf("1390000%04d", i)
			sent, err := a.Auth.SendCode(ctx, phone)
			if err != nil {
				errs <- err
				return
			}
			if _, _, err := a.Auth.Login(ctx, phone, sent.DevCode); err != nil {
				errs <- fmt.Errorf("login %s: %w", phone, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := a.DB.Ent.User.Query().CountX(ctx); got != n {
		t.Fatalf("%d users, want %d", got, n)
	}
}

func TestEmbeddedSeedIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	open := func() *App {
		cfg, _ := ParseConfig([]string{"-data-dir", dir}, envOf(nil))
		a, err := New(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := open()
	if !a.Seeded || a.DB.Ent.Shop.Query().CountX(context.Background()) != 10 {
		t.Fatal("first start did not seed 10 shops")
	}
	a.Close()
	b := open()
	defer b.Close()
	if b.Seeded || b.DB.Ent.Shop.Query().CountX(context.Background()) != 10 {
		t.Fatal("second start seeded again")
	}
}

// The embedded default runs the whole flash-sale flow: admission in miniredis, the consumer
// writing orders into SQLite (its own insert dialect), duplicates refused on both sides.
func TestEmbeddedSeckillFlow(t *testing.T) {
	a := embedded(t)
	ctx := context.Background()
	v := a.DB.Ent.Voucher.Query().Where(voucher.KindEQ(voucher.KindSECKILL)).FirstX(ctx)
	const n = 30
	var wg sync.WaitGroup
	orders := make(chan int64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			phone := fmt.Sprintf("1370000%04d", i)
			sent, err := a.Auth.SendCode(ctx, phone)
			if err != nil {
				t.Error(err)
				return
			}
			_, u, err := a.Auth.Login(ctx, phone, sent.DevCode)
			if err != nil {
				t.Error(err)
				return
			}
			adm, err := a.Seckill.Grab(ctx, u.ID, v.ID)
			if err != nil {
				t.Errorf("grab: %v", err)
				return
			}
			if _, err := a.Seckill.Grab(ctx, u.ID, v.ID); !errors.Is(err, seckill.ErrAlreadyPurchased) {
				t.Errorf("second grab: %v, want ErrAlreadyPurchased", err)
			}
			orders <- adm.OrderID
		}(i)
	}
	wg.Wait()
	close(orders)
	deadline := time.Now().Add(10 * time.Second)
	for a.DB.Ent.SeckillOrder.Query().CountX(ctx) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders in SQLite after 10 s", a.DB.Ent.SeckillOrder.Query().CountX(ctx), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for id := range orders {
		if o := a.DB.Ent.SeckillOrder.GetX(ctx, int(id)); o.VoucherID != v.ID || o.Status != seckillorder.StatusCREATED {
			t.Fatalf("order %d: %+v", id, o)
		}
	}
	if got := *a.DB.Ent.Voucher.GetX(ctx, v.ID).Stock; got != *v.Stock-n {
		t.Fatalf("SQLite stock %d, want %d", got, *v.Stock-n)
	}
}
