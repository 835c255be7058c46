package live_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/live"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// env is one test's world: a fresh MariaDB database with a shop and users, a seckill service
// under a key prefix of its own on the shared Redis, and a Hub on it.
type env struct {
	t      *testing.T
	db     *store.DB
	rdb    redis.UniversalClient
	prefix string
	shop   int
	svc    *seckill.Service
}

func newEnv(t *testing.T, rdb redis.UniversalClient) *env {
	t.Helper()
	db, err := store.OpenMySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	typ := db.Ent.ShopType.Create().SetName("t").SetSort(1).SaveX(ctx)
	sh := db.Ent.Shop.Create().SetName("s").SetTypeID(typ.ID).SetLongitude(0).SetLatitude(0).SetImages([]string{}).SaveX(ctx)
	e := &env{t: t, db: db, rdb: rdb, prefix: "live-test" + testenv.Phone(), shop: sh.ID}
	e.svc = e.service()
	return e
}

// service returns a seckill service on its own Redis client (another "process").
func (e *env) service() *seckill.Service {
	e.t.Helper()
	s, err := seckill.New(e.db.Ent, testenv.Another(e.t, e.rdb), seckill.Options{
		Prefix: e.prefix, Dialect: e.db.Dialect, Logger: quiet(), RateLimit: seckill.RateLimit{PerSecond: -1},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

// consume runs a consumer (persisting queued orders) until the returned stop or cleanup.
func (e *env) consume(s *seckill.Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.RunConsumer(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

// voucher creates a seckill voucher on sale now, warmed into Redis unless cold.
func (e *env) voucher(stock int, cold bool) int {
	e.t.Helper()
	ctx := context.Background()
	v := e.db.Ent.Voucher.Create().SetShopID(e.shop).SetTitle("v").SetPayValue(1).SetActualValue(2).
		SetKind("SECKILL").SetStock(stock).SetBeginAt(time.Now().Add(-time.Hour)).SetEndAt(time.Now().Add(24 * time.Hour)).
		SaveX(ctx)
	if !cold {
		if err := e.svc.Warm(ctx, v.ID); err != nil {
			e.t.Fatal(err)
		}
	}
	return v.ID
}

func (e *env) users(n int) []int {
	e.t.Helper()
	ids := make([]int, n)
	for i := range ids {
		ids[i] = e.db.Ent.User.Create().SetPhone(testenv.Phone()).SetNickname("u").SaveX(context.Background()).ID
	}
	return ids
}

func (e *env) grab(user, voucherID int) int64 {
	e.t.Helper()
	a, err := e.svc.Grab(context.Background(), user, voucherID)
	if err != nil {
		e.t.Fatalf("grab by user %d: %v", user, err)
	}
	return a.OrderID
}

func (e *env) hub(o live.Options) *live.Hub {
	if o.Logger == nil {
		o.Logger = quiet()
	}
	h := live.New(e.svc, e.db.Ent, o)
	e.t.Cleanup(h.Close)
	return h
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// next waits for the next value (ok false: the channel was closed).
func next[V any](t *testing.T, ch <-chan V, within time.Duration) (v V, ok bool) {
	t.Helper()
	select {
	case v, ok = <-ch:
		return v, ok
	case <-time.After(within):
		t.Fatalf("no value and no close within %v", within)
	}
	return v, false
}

func want[V comparable](t *testing.T, ch <-chan V, w V, within time.Duration) {
	t.Helper()
	v, ok := next(t, ch, within)
	if !ok || v != w {
		t.Fatalf("got %v (open %v), want %v", v, ok, w)
	}
}

// wantAllEndCreated reads every order stream to its end: each must end with CREATED.
func wantAllEndCreated(t *testing.T, chans []<-chan seckillorder.Status) {
	t.Helper()
	for i, ch := range chans {
		var last seckillorder.Status
		for s := range ch {
			last = s
		}
		if last != seckillorder.StatusCREATED {
			t.Errorf("order %d: stream ended at %q", i, last)
		}
	}
}

func wantClosed[V any](t *testing.T, ch <-chan V, within time.Duration) {
	t.Helper()
	if v, ok := next(t, ch, within); ok {
		t.Fatalf("got %v, want the channel closed", v)
	}
}

func wantNothing[V any](t *testing.T, ch <-chan V, during time.Duration) {
	t.Helper()
	select {
	case v, ok := <-ch:
		t.Fatalf("got %v (open %v), want nothing for %v", v, ok, during)
	case <-time.After(during):
	}
}

// liveGoroutines counts the subscribers' goroutines of package live (forwarders; the Hub's
// own two run until Close).
func liveGoroutines() (int, string) {
	count := 0
	var dump strings.Builder
	for _, g := range testenv.Goroutines() {
		if bytes.Contains(g, []byte("surge/internal/live.(*feed")) && !bytes.Contains(g, []byte("live_test.")) {
			count++
			dump.Write(g)
			dump.WriteString("\n\n")
		}
	}
	return count, dump.String()
}

// noLeaks waits until no goroutine of package live is left and the hub reports nothing open.
func noLeaks(t *testing.T, h *live.Hub) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, dump := liveGoroutines()
		st := h.Stats()
		if n == 0 && st.StockTopics == 0 && st.StockSubscribers == 0 && st.OrderTopics == 0 && st.OrderSubscribers == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of package live left, stats %+v:\n%s", n, st, dump)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStockStream(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		h := e.hub(live.Options{})
		v := e.voucher(5, false)
		users := e.users(3)
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		ch, err := h.Stock(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		want(t, ch, 5, time.Second)
		if d := time.Since(start); d > 90*time.Millisecond {
			t.Errorf("first value after %v: want it at once, not after a poll interval", d)
		}
		e.grab(users[0], v)
		want(t, ch, 4, time.Second)
		e.grab(users[1], v)
		e.grab(users[2], v)
		// Two grabs within one poll interval or one throttle pause: 3 may be skipped, 2 is not.
		got, _ := next(t, ch, time.Second)
		if got == 3 {
			got, _ = next(t, ch, time.Second)
		}
		if got != 2 {
			t.Fatalf("after three grabs: got %d, want 2", got)
		}
		wantNothing(t, ch, 300*time.Millisecond) // no change, no message
		cancel()
		wantClosed(t, ch, time.Second)
		noLeaks(t, h)
	})
}

func TestStockThrottleDeliversLatest(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	const throttle = 300 * time.Millisecond
	h := e.hub(live.Options{StockInterval: 10 * time.Millisecond, StockThrottle: throttle})
	v := e.voucher(50, false)
	users := e.users(20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := h.Stock(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	type msg struct {
		v  int
		at time.Time
	}
	var msgs []msg
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := range ch {
			msgs = append(msgs, msg{n, time.Now()})
			if n == 30 {
				return
			}
		}
	}()
	// 20 grabs over ~1 s: one every 50 ms, far more often than the throttle lets through.
	for _, u := range users {
		e.grab(u, v)
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatalf("the latest stock (30) never arrived; got %v", msgs)
	}
	if len(msgs) > 6 || len(msgs) < 3 {
		t.Errorf("%d messages for 20 changes in ~1 s with a %v throttle: %v", len(msgs), throttle, msgs)
	}
	for i := 1; i < len(msgs); i++ {
		if gap := msgs[i].at.Sub(msgs[i-1].at); gap < throttle-20*time.Millisecond {
			t.Errorf("messages %d and %d only %v apart (throttle %v)", i-1, i, gap, throttle)
		}
		if msgs[i].v >= msgs[i-1].v {
			t.Errorf("stock went %d -> %d", msgs[i-1].v, msgs[i].v)
		}
	}
	t.Logf("%d messages: %v", len(msgs), msgs)
}

// TestSubscribersShareNothingWhileIdle: subscribers of a voucher share its topic, and while
// nothing changes the Hub reads nothing (it used to poll each voucher every 100 ms).
func TestSubscribersShareNothingWhileIdle(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	h := e.hub(live.Options{StockInterval: 100 * time.Millisecond, StockThrottle: -1, SweepInterval: time.Hour})
	v := e.voucher(10, false)
	other := e.voucher(10, false)
	user := e.users(1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	const n = 25
	chans := make([]<-chan int, n)
	for i := range chans {
		var err error
		if chans[i], err = h.Stock(ctx, v); err != nil {
			t.Fatal(err)
		}
		want(t, chans[i], 10, time.Second)
	}
	otherCtx, cancelOther := context.WithCancel(context.Background())
	otherCh, err := h.Stock(otherCtx, other)
	if err != nil {
		t.Fatal(err)
	}
	want(t, otherCh, 10, time.Second)
	st := h.Stats()
	if st.StockTopics != 2 || st.StockSubscribers != n+1 {
		t.Fatalf("stats %+v: want 2 topics (one per voucher) and %d subscribers", st, n+1)
	}
	time.Sleep(300 * time.Millisecond) // the start's catch-up
	before := h.Stats().StockReads
	time.Sleep(time.Second)
	if reads := h.Stats().StockReads - before; reads != 0 {
		t.Errorf("%d stock reads in 1 s without a change, want none", reads)
	}
	e.grab(user, v)
	for _, ch := range chans {
		want(t, ch, 9, time.Second)
	}
	wantNothing(t, otherCh, 200*time.Millisecond)
	// The last subscriber of a voucher leaving removes its topic; the other voucher's stays.
	cancel()
	for _, ch := range chans {
		wantClosed(t, ch, time.Second)
	}
	deadline := time.Now().Add(2 * time.Second)
	for st = h.Stats(); st.StockTopics != 1 || st.StockSubscribers != 1; st = h.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v after the first voucher's subscribers left", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancelOther()
	wantClosed(t, otherCh, time.Second)
	noLeaks(t, h)
}

func TestSlowSubscriberGetsLatest(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	h := e.hub(live.Options{StockInterval: 20 * time.Millisecond, StockThrottle: -1})
	v := e.voucher(10, false)
	users := e.users(5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, err := h.Stock(ctx, v) // never read until the end
	if err != nil {
		t.Fatal(err)
	}
	fast, err := h.Stock(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	want(t, fast, 10, time.Second)
	for i, u := range users {
		e.grab(u, v)
		want(t, fast, 9-i, time.Second) // the poller is not held up by the slow one
	}
	// The slow subscriber missed the values in between, the first included: its one-value
	// channel holds the latest.
	want(t, slow, 5, time.Second)
	wantNothing(t, slow, 100*time.Millisecond)
}

func TestStockUnknownAndNotReady(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	// Changes made behind the service's back announce nothing: the sweep finds them.
	h := e.hub(live.Options{StockInterval: 20 * time.Millisecond, SweepInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := h.Stock(ctx, 1<<40); !errors.Is(err, live.ErrNotFound) {
		t.Fatalf("unknown voucher: %v, want ErrNotFound", err)
	}
	normal := e.db.Ent.Voucher.Create().SetShopID(e.shop).SetTitle("n").SetPayValue(1).SetActualValue(2).SaveX(ctx)
	if _, err := h.Stock(ctx, normal.ID); !errors.Is(err, live.ErrNotFound) {
		t.Fatalf("normal voucher: %v, want ErrNotFound", err)
	}

	// A seckill voucher Redis does not hold yet: the stream waits, then starts.
	v := e.voucher(7, true)
	ch, err := h.Stock(ctx, v)
	if err != nil {
		t.Fatalf("cold voucher: %v", err)
	}
	wantNothing(t, ch, 200*time.Millisecond)
	if err := e.svc.Warm(ctx, v); err != nil {
		t.Fatal(err)
	}
	want(t, ch, 7, time.Second)

	// Redis loses the stock (a rebuild under way): ticks are skipped, the stream stays.
	k := seckill.KeysOf(e.prefix, v)
	if err := e.rdb.Del(ctx, k.Stock).Err(); err != nil {
		t.Fatal(err)
	}
	wantNothing(t, ch, 300*time.Millisecond)
	if err := e.rdb.Set(ctx, k.Stock, 6, 0).Err(); err != nil {
		t.Fatal(err)
	}
	want(t, ch, 6, time.Second)
}

func TestOrderStatusStream(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		h := e.hub(live.Options{})
		v := e.voucher(5, false)
		users := e.users(3)
		order := e.grab(users[0], v) // no consumer yet: QUEUED
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, err := h.OrderStatus(ctx, users[0], order)
		if err != nil {
			t.Fatal(err)
		}
		want(t, ch, seckillorder.StatusQUEUED, time.Second)
		again, err := h.OrderStatus(ctx, users[0], order)
		if err != nil {
			t.Fatal(err)
		}
		want(t, again, seckillorder.StatusQUEUED, time.Second)
		if st := h.Stats(); st.OrderTopics != 1 || st.OrderSubscribers != 2 {
			t.Fatalf("stats %+v: want 1 order topic, 2 subscribers", st)
		}
		wantNothing(t, ch, 250*time.Millisecond)

		// Not the owner, or no such order: not found.
		if _, err := h.OrderStatus(ctx, users[1], order); !errors.Is(err, live.ErrNotFound) {
			t.Fatalf("another user's order: %v", err)
		}
		if _, err := h.OrderStatus(ctx, users[0], order+1); !errors.Is(err, live.ErrNotFound) {
			t.Fatalf("no such order: %v", err)
		}

		e.consume(e.svc)
		want(t, ch, seckillorder.StatusCREATED, 10*time.Second)
		wantClosed(t, ch, time.Second)
		want(t, again, seckillorder.StatusCREATED, time.Second)
		wantClosed(t, again, time.Second)
		noLeaks(t, h)

		// A subscription to an order already settled: its status, then the end; no poller.
		late, err := h.OrderStatus(ctx, users[0], order)
		if err != nil {
			t.Fatal(err)
		}
		want(t, late, seckillorder.StatusCREATED, time.Second)
		wantClosed(t, late, time.Second)
		noLeaks(t, h)
	})
}

// TestOrderStatusNeverVanishes subscribes to many orders while the consumer persists them:
// every stream must go QUEUED (or straight to CREATED) and end with CREATED, none with
// "not found" while its order moves from the Redis stream to the database.
func TestOrderStatusNeverVanishes(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	var mu sync.Mutex
	var failures []string
	h := e.hub(live.Options{OnError: func(_ context.Context, err error) {
		mu.Lock()
		failures = append(failures, err.Error())
		mu.Unlock()
	}})
	const n = 60
	v := e.voucher(n, false)
	users := e.users(n)
	orders := make([]int64, n)
	for i, u := range users {
		orders[i] = e.grab(u, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	chans := make([]<-chan seckillorder.Status, n)
	for i := range chans {
		var err error
		if chans[i], err = h.OrderStatus(ctx, users[i], orders[i]); err != nil {
			t.Fatal(err)
		}
	}
	e.consume(e.service())
	wantAllEndCreated(t, chans)
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d streams ended with an error: %v", len(failures), failures)
	}
	noLeaks(t, h)
}

func TestOrderVanishingEndsWithNotFound(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	errs := make(chan error, 1)
	// Done behind the service's back, the change is found by the sweep.
	h := e.hub(live.Options{SweepInterval: 100 * time.Millisecond, OnError: func(_ context.Context, err error) { errs <- err }})
	v := e.voucher(5, false)
	user := e.users(1)[0]
	order := e.grab(user, v)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := h.OrderStatus(ctx, user, order)
	if err != nil {
		t.Fatal(err)
	}
	want(t, ch, seckillorder.StatusQUEUED, time.Second)
	// What superseding an order does to it (the consumer drops an admission whose user already
	// has an order in the database): its buyer entry goes, and with it the order.
	k := seckill.KeysOf(e.prefix, v)
	if err := e.rdb.HDel(ctx, k.Buyers, fmt.Sprint(user)).Err(); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, ch, time.Second)
	select {
	case err := <-errs:
		if !errors.Is(err, live.ErrNotFound) {
			t.Fatalf("OnError got %v, want ErrNotFound", err)
		}
	default:
		t.Fatal("the stream ended without OnError")
	}
	noLeaks(t, h)
}

func TestCloseEndsStreams(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	h := live.New(e.svc, e.db.Ent, live.Options{Logger: quiet()})
	v := e.voucher(3, false)
	user := e.users(1)[0]
	order := e.grab(user, v)
	ctx := context.Background()
	stock, err := h.Stock(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	status, err := h.OrderStatus(ctx, user, order)
	if err != nil {
		t.Fatal(err)
	}
	want(t, stock, 2, time.Second)
	want(t, status, seckillorder.StatusQUEUED, time.Second)
	h.Close()
	wantClosed(t, stock, time.Second)
	wantClosed(t, status, time.Second)
	if _, err := h.Stock(ctx, v); !errors.Is(err, live.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	noLeaks(t, h)
}
