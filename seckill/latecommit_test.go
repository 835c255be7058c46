package seckill_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/seckill"
)

// TestLateWarmCommitChangesNothing: Redis hangs just as a warm commits a stock read from the
// database; the warm gives up and releases the voucher. While Redis is frozen the database
// moves on (here its stock is set again, as the consumer's batches or an admin would). When
// Redis thaws it runs the commit it had received: that must write nothing, or Redis would sell
// from the stale stock.
func TestLateWarmCommitChangesNothing(t *testing.T) {
	e, srv := privateEnv(t)
	ctx := context.Background()
	s := e.service(seckill.Options{})
	v := e.onSale(s, 100)
	k := seckill.KeysOf(e.prefix, v)

	if err := e.db.Ent.Voucher.UpdateOneID(v).SetStock(150).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restore := seckill.SetBeforeWarmCommitHook(func() { once.Do(srv.Freeze) })
	start := time.Now()
	err := s.Warm(ctx, v)
	restore()
	t.Logf("warm with Redis frozen at its commit: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if err == nil {
		t.Fatal("the warm succeeded with Redis frozen")
	}
	if err := e.db.Ent.Voucher.UpdateOneID(v).SetStock(120).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Thaw()
	time.Sleep(time.Second) // the commit Redis had received runs now
	if got, err := e.rdb.Get(ctx, k.Stock).Int64(); err != nil || got != 100 {
		t.Fatalf("Redis stock %d (%v) after the late commit, want the 100 it had: the stale 150 must not land", got, err)
	}
	if err := s.Warm(ctx, v); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.rdb.Get(ctx, k.Stock).Int64(); got != 120 {
		t.Fatalf("Redis stock %d after a fresh warm, want 120", got)
	}
}
