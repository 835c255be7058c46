package seckill_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// env is one test's world: a fresh MariaDB database with a shop, and a key prefix of its own
// on the shared Redis.
type env struct {
	t      testing.TB
	db     *store.DB
	rdb    redis.UniversalClient
	prefix string
	ns     string // the namespace of the test's services, if it sets one (bucketKeys)
	dsn    string
	shop   int
}

func newEnv(t testing.TB, rdb redis.UniversalClient) *env {
	t.Helper()
	dsn := testenv.MySQL(t)
	db, err := store.OpenMySQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxConns(testenv.MySQLConns())
	ctx := context.Background()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	typ := db.Ent.ShopType.Create().SetName("t").SetSort(1).SaveX(ctx)
	sh := db.Ent.Shop.Create().SetName("s").SetTypeID(typ.ID).SetLongitude(0).SetLatitude(0).SetImages([]string{}).SaveX(ctx)
	prefix := "seckill-test" + testenv.Phone()
	// The sales' keys expire with them (days after), but a test leaves nothing behind: they
	// are deleted once the services the test starts later have closed.
	testenv.CleanupKeys(t, rdb, prefix+":*")
	return &env{t: t, db: db, rdb: rdb, prefix: prefix, dsn: dsn, shop: sh.ID}
}

// voucher creates a seckill voucher with the given stock, on sale from an hour ago for a day.
func (e *env) voucher(stock int) int {
	return e.voucherWindow(stock, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

func (e *env) voucherWindow(stock int, begin, end time.Time) int {
	e.t.Helper()
	v := e.db.Ent.Voucher.Create().SetShopID(e.shop).SetTitle("v").SetPayValue(1).SetActualValue(2).
		SetKind("SECKILL").SetStock(stock).SetBeginAt(begin).SetEndAt(end).SaveX(context.Background())
	return v.ID
}

// poisonUser makes the database refuse every CREATED order of user (a trigger, name), as the
// cause of a poisoned entry would; cure drops it (so does the test's cleanup).
func (e *env) poisonUser(name string, user int) (cure func()) {
	e.t.Helper()
	_, err := e.db.SQL.Exec(fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON tb_voucher_order FOR EACH ROW
		BEGIN IF NEW.user_id = %d AND NEW.status = 'CREATED' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned order'; END IF; END`, name, user))
	if err != nil {
		e.t.Fatal(err)
	}
	drop := func() error { _, err := e.db.SQL.Exec("DROP TRIGGER IF EXISTS " + name); return err }
	e.t.Cleanup(func() { _ = drop() })
	return func() {
		e.t.Helper()
		if err := drop(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// users inserts n users and returns their ids.
func (e *env) users(n int) []int {
	e.t.Helper()
	ctx := context.Background()
	ids := make([]int, 0, n)
	base := time.Now().UnixNano() % 1_000_000
	for start := 0; start < n; start += 1000 {
		var bulk []*ent.UserCreate
		for i := start; i < min(n, start+1000); i++ {
			bulk = append(bulk, e.db.Ent.User.Create().SetPhone(fmt.Sprintf("17%03d%06d", base%1000, i)).SetNickname("u"))
		}
		for _, u := range e.db.Ent.User.CreateBulk(bulk...).SaveX(ctx) {
			ids = append(ids, u.ID)
		}
	}
	return ids
}

func (e *env) options(o seckill.Options) seckill.Options {
	o.Prefix = e.prefix
	o.Dialect = e.db.Dialect
	if o.EpochStore == nil {
		o.EpochStore = e.db.Epochs()
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	if o.RateLimit.PerSecond == 0 {
		o.RateLimit.PerSecond = -1
	}
	return o
}

// service returns a Service on its own Redis client (another "process"), closed at cleanup.
func (e *env) service(o seckill.Options) *seckill.Service {
	e.t.Helper()
	s, err := seckill.New(e.db.Ent, testenv.Another(e.t, e.rdb), e.options(o))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

// consume runs a service's consumer until cleanup (or until the returned stop is called).
func (e *env) consume(s *seckill.Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.RunConsumer(ctx) }()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return stop
}

// drained waits until a voucher's stream is empty (every admitted order persisted or failed).
func (e *env) drained(v int, within time.Duration) {
	e.t.Helper()
	k := seckill.KeysOf(e.prefix, v)
	deadline := time.Now().Add(within)
	for {
		n, err := e.rdb.XLen(context.Background(), k.Orders).Result()
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("voucher %d: stream still holds %d orders after %v (err %v)", v, n, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// state is what the invariants compare.
type state struct {
	dbStock, orders, failed, redisStock, buyers int
	dupUsers                                    int
}

func (e *env) state(v int) state {
	e.t.Helper()
	ctx := context.Background()
	var st state
	vo := e.db.Ent.Voucher.GetX(ctx, v)
	st.dbStock = *vo.Stock
	givenUp := []seckillorder.Status{seckillorder.StatusFAILED, seckillorder.StatusLOST}
	st.orders = e.db.Ent.SeckillOrder.Query().Where(seckillorder.VoucherID(v), seckillorder.StatusNotIn(givenUp...)).CountX(ctx)
	st.failed = e.db.Ent.SeckillOrder.Query().Where(seckillorder.VoucherID(v), seckillorder.StatusIn(givenUp...)).CountX(ctx)
	var dup []struct {
		UserID int `json:"user_id"`
		Count  int `json:"count"`
	}
	e.db.Ent.SeckillOrder.Query().Where(seckillorder.VoucherID(v), seckillorder.StatusNotIn(givenUp...)).
		GroupBy(seckillorder.FieldUserID).Aggregate(ent.Count()).ScanX(ctx, &dup)
	for _, d := range dup {
		if d.Count > 1 {
			st.dupUsers++
		}
	}
	k := seckill.KeysOf(e.prefix, v)
	st.redisStock, _ = e.rdb.Get(ctx, k.Stock).Int()
	n, _ := e.rdb.HLen(ctx, k.Buyers).Result()
	st.buyers = int(n)
	return st
}

func quietLogger() *slog.Logger {
	if v := os.Getenv("SECKILL_LOG"); v != "" {
		opts := &slog.HandlerOptions{}
		if v == "debug" {
			opts.Level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// onSale creates a seckill voucher with the given stock, on sale now, and warms it through s.
func (e *env) onSale(s *seckill.Service, stock int) int {
	e.t.Helper()
	v := e.voucher(stock)
	if err := s.Warm(context.Background(), v); err != nil {
		e.t.Fatal(err)
	}
	return v
}
