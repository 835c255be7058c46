package seckill_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/seckill"
)

// TestScriptAdmitsABatch: one script call with several grabs answers each in order, as if
// they had run one after the other: a repeated user is told its first order, the stock runs
// out part-way, and a resent grab (same order id) is answered "admitted" again.
func TestScriptAdmitsABatch(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		s := e.service(seckill.Options{})
		v := e.onSale(s, 2)
		k := seckill.KeysOf(e.prefix, v)
		grabs := []lua.GrabRequest{{User: 1, Order: 101}, {User: 2, Order: 102}, {User: 1, Order: 103}, {User: 3, Order: 104}, {User: 2, Order: 102}, {User: 1, Order: 101}}
		res, err := lua.Grab(ctx, rdb, lua.SeckillKeys(k), time.Now(), grabs)
		if err != nil {
			t.Fatal(err)
		}
		want := []lua.GrabReply{
			{Outcome: lua.GrabAdmitted, StockLeft: 1}, {Outcome: lua.GrabAdmitted, StockLeft: 0},
			{Outcome: lua.GrabAlreadyBuyer, Holder: 101}, {Outcome: lua.GrabSoldOut},
			{Outcome: lua.GrabAdmitted, StockLeft: 0}, {Outcome: lua.GrabAdmitted, StockLeft: 0},
		}
		if fmt.Sprint(res) != fmt.Sprint(want) {
			t.Fatalf("answers %v, want %v", res, want)
		}
		if n := rdb.XLen(ctx, k.Orders).Val(); n != 2 {
			t.Fatalf("%d stream entries, want 2", n)
		}
		if st := rdb.Get(ctx, k.Stock).Val(); st != "0" {
			t.Fatalf("stock %s, want 0", st)
		}
		if b := rdb.HGetAll(ctx, k.Buyers).Val(); len(b) != 2 || b["1"] != "101" || b["2"] != "102" {
			t.Fatalf("buyers %v", b)
		}
	})
}

// TestConcurrentGrabsShareScriptCalls: grabs of many goroutines on three vouchers (one of them
// not on sale yet) go out in fewer script calls than grabs, and every caller gets its own
// answer: the order id it was told is the one Redis recorded for it, each open voucher admits
// exactly its stock, and the later one admits nobody.
func TestConcurrentGrabsShareScriptCalls(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const stock, users = 40, 150
		ids := e.users(users)
		s := e.service(seckill.Options{Pipelines: 1})
		open := []int{e.onSale(s, stock), e.onSale(s, stock)}
		later := e.voucherWindow(stock, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
		if err := s.Warm(ctx, later); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			user, voucher int
			a             seckill.Admission
			err           error
		}
		answers := make(chan answer, 3*users)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, u := range ids {
			for _, v := range []int{open[0], open[1], later} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					a, err := s.Grab(ctx, u, v)
					answers <- answer{u, v, a, err}
				}()
			}
		}
		close(start)
		wg.Wait()
		close(answers)
		admitted := map[int]int{}
		for a := range answers {
			switch {
			case a.voucher == later:
				if !errors.Is(a.err, seckill.ErrNotStarted) {
					t.Errorf("user %d on the later voucher: %v, want ErrNotStarted", a.user, a.err)
				}
			case a.err == nil:
				admitted[a.voucher]++
				got := rdb.HGet(ctx, seckill.KeysOf(e.prefix, a.voucher).Buyers, strconv.Itoa(a.user)).Val()
				if got != strconv.FormatInt(a.a.OrderID, 10) {
					t.Errorf("user %d was told order %d, Redis has %q", a.user, a.a.OrderID, got)
				}
			case !errors.Is(a.err, seckill.ErrSoldOut):
				t.Errorf("user %d on voucher %d: %v", a.user, a.voucher, a.err)
			}
		}
		for _, v := range open {
			if admitted[v] != stock {
				t.Errorf("voucher %d admitted %d, want %d", v, admitted[v], stock)
			}
		}
		calls, inlined := seckill.AdmissionCalls(s), seckill.AdmissionInlined(s)
		if calls >= 3*users || calls == inlined {
			t.Errorf("%d script calls (%d from the grabbing goroutine) for %d grabs: no batching", calls, inlined, 3*users)
		} else {
			t.Logf("%d script calls (%d from the grabbing goroutine) for %d grabs", calls, inlined, 3*users)
		}
	})
}

// TestLoneGrabsGoOutFromTheirGoroutine: a grab that meets no other grab in flight is sent from
// its own goroutine, one script call, and answered as a batched grab is.
func TestLoneGrabsGoOutFromTheirGoroutine(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		s := e.service(seckill.Options{})
		v := e.onSale(s, 3)
		ids := e.users(5)
		admitted := 0
		for _, u := range append(ids, ids[0]) {
			a, err := s.Grab(ctx, u, v)
			switch {
			case err == nil:
				admitted++
				if got := rdb.HGet(ctx, seckill.KeysOf(e.prefix, v).Buyers, strconv.Itoa(u)).Val(); got != strconv.FormatInt(a.OrderID, 10) {
					t.Errorf("user %d was told order %d, Redis has %q", u, a.OrderID, got)
				}
			case u == ids[0] && admitted == 3:
				if !errors.Is(err, seckill.ErrAlreadyPurchased) {
					t.Errorf("first user again: %v, want ErrAlreadyPurchased", err)
				}
			case !errors.Is(err, seckill.ErrSoldOut):
				t.Errorf("user %d: %v", u, err)
			}
		}
		if admitted != 3 {
			t.Errorf("admitted %d, want the stock 3", admitted)
		}
		if calls, inlined := seckill.AdmissionCalls(s), seckill.AdmissionInlined(s); calls != 6 || inlined != 6 {
			t.Errorf("%d script calls, %d from the grabbing goroutine, for 6 grabs one after another: want 6 and 6", calls, inlined)
		}
	})
}
