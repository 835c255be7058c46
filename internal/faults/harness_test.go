package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// long reports whether the long versions run (SECKILL_FAULTS_LONG=1).
func long() bool { return os.Getenv("SECKILL_FAULTS_LONG") == "1" }

func pick[T any](short, long_ T) T {
	if long() {
		return long_
	}
	return short
}

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveSurgeBinary()
	os.Exit(code)
}

func surgeBinary(t *testing.T) string { return testenv.SurgeBinary(t) }

// proc is one running `surge serve` child process.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:PORT/
	log     *tailBuffer
	done    chan struct{}
	waitErr error
}

var urlLine = regexp.MustCompile(`^surge: playground at (http://\S+/)$`)

// startSurge starts `surge serve` with env (plus PATH and HOME, listening on 127.0.0.1:0) and
// waits for its URL line: by then the app is wired, the vouchers warmed and the consumer
// started. It is killed at cleanup if still running.
func startSurge(t *testing.T, env ...string) *proc {
	t.Helper()
	bin := surgeBinary(t)
	p := &proc{t: t, log: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	lines := testenv.NewLineWriter(16)
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SURGE_ADDR=127.0.0.1:0"}, env...)
	p.cmd.Stdout, p.cmd.Stderr = lines, p.log
	if dir := os.Getenv("SECKILL_FAULTS_LOGS"); dir != "" {
		// The whole log of every process, kept: SECKILL_FAULTS_LOGS=dir.
		f, err := os.CreateTemp(dir, "surge-*.log")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		p.cmd.Stderr = io.MultiWriter(p.log, f)
		t.Logf("the log of surge goes to %s too", f.Name())
	}
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("end of the log of surge (pid %d):\n%s", p.cmd.Process.Pid, p.log.String())
		}
	})
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for p.base == "" {
		select {
		case line := <-lines.Lines():
			if m := urlLine.FindStringSubmatch(line); m != nil {
				p.base = m[1]
			}
		case <-p.done:
			t.Fatalf("surge exited before printing its URL: %v\n%s", p.waitErr, p.log.String())
		case <-deadline.C:
			t.Fatalf("surge printed no URL within 60 s\n%s", p.log.String())
		}
	}
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Errorf("surge (pid %d) still running 30 s after SIGKILL", p.pid())
	}
}

// term sends SIGTERM and asserts a clean exit (code 0) within 30 s.
func (p *proc) term() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("surge (pid %d) did not exit within 30 s of SIGTERM", p.pid())
	}
	if p.waitErr != nil {
		p.t.Fatalf("surge exited uncleanly after SIGTERM: %v", p.waitErr)
	}
}

// health GETs /healthz: status and body.
func (p *proc) health() (int, map[string]string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.base + "healthz")
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]string
	err = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, err
}

// world is one test's sale: a database with a shop, a seckill voucher and users, and a
// seckill service in the test process (no consumer) on the same Redis and namespace as the
// surge processes, to admit orders and read state.
type world struct {
	t     *testing.T
	db    *store.DB
	dsn   string
	rdb   redis.UniversalClient
	redis []string // the surge processes' settings naming the Redis (SURGE_REDIS_ADDRS, or Sentinel's)
	ns    string
	svc   *seckill.Service
	v     int
	stock int
	users []int
	keys  seckill.Keys
}

func newWorld(t *testing.T, dsn, redisAddr string, stock, users int) *world {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	return newWorldOn(t, dsn, rdb, []string{"SURGE_REDIS_ADDRS=" + redisAddr}, stock, users, nil)
}

// newWorldOn is newWorld on a Redis client of the caller's, which the surge processes reach
// through the settings redisEnv. nsFor, if not nil, names the namespace for the voucher's id
// (else it is random).
func newWorldOn(t *testing.T, dsn string, rdb redis.UniversalClient, redisEnv []string, stock, users int, nsFor func(voucherID int) string) *world {
	t.Helper()
	ctx := context.Background()
	db, err := store.OpenMySQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxConns(testenv.MySQLConns())
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, db: db, dsn: dsn, rdb: rdb, redis: redisEnv, stock: stock}
	typ := db.Ent.ShopType.Create().SetName("t").SetSort(1).SaveX(ctx)
	sh := db.Ent.Shop.Create().SetName("s").SetTypeID(typ.ID).SetLongitude(0).SetLatitude(0).SetImages([]string{}).SaveX(ctx)
	w.v = db.Ent.Voucher.Create().SetShopID(sh.ID).SetTitle("v").SetPayValue(1).SetActualValue(2).
		SetKind("SECKILL").SetStock(stock).SetBeginAt(time.Now().Add(-time.Hour)).SetEndAt(time.Now().Add(24 * time.Hour)).
		SaveX(ctx).ID
	w.ns = "faults" + testenv.Phone()
	if nsFor != nil {
		w.ns = nsFor(w.v)
	}
	testenv.CleanupKeys(t, rdb, w.ns+":*")
	w.keys = seckill.KeysOf(seckill.KeyPrefix(w.ns, seckill.DefaultPrefix), w.v)
	for start := 0; start < users; start += 2000 {
		var bulk []*ent.UserCreate
		for i := start; i < min(users, start+2000); i++ {
			bulk = append(bulk, db.Ent.User.Create().SetPhone(fmt.Sprintf("13%09d", i)).SetNickname("u"))
		}
		for _, u := range db.Ent.User.CreateBulk(bulk...).SaveX(ctx) {
			w.users = append(w.users, u.ID)
		}
	}
	w.svc, err = seckill.New(db.Ent, rdb, seckill.Options{
		Namespace: w.ns, Dialect: db.Dialect, RateLimit: seckill.RateLimit{PerSecond: -1}, Logger: quiet(),
		EpochStore: db.Epochs(), // as the surge processes on this world have
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.svc.Close() })
	if err := w.svc.Warm(ctx, w.v); err != nil {
		t.Fatal(err)
	}
	return w
}

// env is the configuration of a surge process on this world.
func (w *world) env(consumer bool, claimIdle time.Duration) []string {
	return append([]string{
		"SURGE_MYSQL_DSN=" + w.dsn, "SURGE_MODE=production",
		"SURGE_NAMESPACE=" + w.ns, "SURGE_SECKILL_RATE=-1", fmt.Sprintf("SURGE_MYSQL_MAX_CONNS=%d", testenv.MySQLConns()),
		fmt.Sprintf("SURGE_SECKILL_CONSUMER=%v", consumer), "SURGE_SECKILL_CLAIM_IDLE=" + claimIdle.String(),
	}, w.redis...)
}

// tally records what each grab answered.
type tally struct {
	mu       sync.Mutex
	admitted map[int64]int // order id -> user, answered "admitted" (or learnt on a retry)
	byUser   map[int]int64
	sold     atomic.Int64
	notReady atomic.Int64
	errors   atomic.Int64 // transport failures (retried)
	learnt   atomic.Int64 // admissions whose answer was lost, learnt from ALREADY_PURCHASED
}

func newTally() *tally { return &tally{admitted: map[int64]int{}, byUser: map[int]int64{}} }

func (tl *tally) count() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.admitted)
}

func (tl *tally) add(t *testing.T, id int64, user int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if prev, ok := tl.admitted[id]; ok && prev != user {
		t.Errorf("order id %d handed to users %d and %d", id, prev, user)
	}
	if prev, ok := tl.byUser[user]; ok && prev != id {
		t.Errorf("user %d admitted twice: orders %d and %d", user, prev, id)
	}
	tl.admitted[id] = user
	tl.byUser[user] = id
}

// grab tries until the user gets a definite answer: admitted, sold out, or already purchased
// (an earlier try was admitted in Redis but its answer was lost to a failure: the order id
// comes back with the answer). NOT_READY and failures are retried until deadline.
func (w *world) grab(t *testing.T, tl *tally, user int, deadline time.Time) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, err := w.svc.Grab(ctx, user, w.v)
		cancel()
		switch {
		case err == nil:
			tl.add(t, a.OrderID, user)
			return
		case errors.Is(err, seckill.ErrAlreadyPurchased):
			tl.learnt.Add(1)
			tl.add(t, a.OrderID, user)
			return
		case errors.Is(err, seckill.ErrSoldOut):
			tl.sold.Add(1)
			return
		case errors.Is(err, seckill.ErrNotReady):
			tl.notReady.Add(1)
		default:
			tl.errors.Add(1)
		}
		if time.Now().After(deadline) {
			t.Errorf("user %d: no answer before the deadline (last: %v)", user, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// grabAll has every user grab once, from n goroutines.
func (w *world) grabAll(t *testing.T, tl *tally, users []int, n int) {
	work := make(chan int)
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Minute)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				w.grab(t, tl, u, deadline)
			}
		}()
	}
	for _, u := range users {
		work <- u
	}
	close(work)
	wg.Wait()
}

// streamLen, pending and dead read the voucher's queue.
func (w *world) streamLen() int64 { return w.rdb.XLen(context.Background(), w.keys.Orders).Val() }
func (w *world) dead() int64      { return w.rdb.XLen(context.Background(), w.keys.Dead).Val() }
func (w *world) pending() int64 {
	p, err := w.rdb.XPending(context.Background(), w.keys.Orders, "orders").Result()
	if err != nil {
		return -1
	}
	return p.Count
}

// persisted counts the voucher's orders in MySQL (every status).
func (w *world) persisted() int {
	var n int
	_ = w.db.SQL.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", w.v).Scan(&n)
	return n
}

// drained waits until the stream is empty and nothing is pending.
func (w *world) drained(within time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, p := w.streamLen(), w.pending()
		if n == 0 && p == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("after %v the stream still holds %d orders, %d pending", within, n, p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// final is the settled state of the sale.
type final struct {
	orders     map[int64]int // live orders in MySQL: id -> user
	lost       map[int64]int // LOST orders in MySQL (told, then lost with Redis): id -> user
	failedIDs  map[int64]int // FAILED orders in MySQL: id -> user
	failed     int           // FAILED orders
	dupUsers   int
	dbStock    int
	redisStock int
	buyers     int
	stream     int64
	pending    int64
	dead       int64
}

func (w *world) final() final {
	w.t.Helper()
	ctx := context.Background()
	f := final{orders: map[int64]int{}, lost: map[int64]int{}, failedIDs: map[int64]int{}}
	rows := w.db.Ent.SeckillOrder.Query().Where(seckillorder.VoucherID(w.v)).AllX(ctx)
	perUser := map[int]int{}
	for _, o := range rows {
		switch o.Status {
		case seckillorder.StatusFAILED:
			f.failed++
			f.failedIDs[int64(o.ID)] = o.UserID
			continue
		case seckillorder.StatusLOST:
			f.lost[int64(o.ID)] = o.UserID
			continue
		}
		f.orders[int64(o.ID)] = o.UserID
		perUser[o.UserID]++
	}
	for _, n := range perUser {
		if n > 1 {
			f.dupUsers++
		}
	}
	f.dbStock = *w.db.Ent.Voucher.GetX(ctx, w.v).Stock
	f.redisStock, _ = w.rdb.Get(ctx, w.keys.Stock).Int()
	f.buyers = int(w.rdb.HLen(ctx, w.keys.Buyers).Val())
	f.stream, f.pending, f.dead = w.streamLen(), w.pending(), w.dead()
	return f
}

// checkNoLoss asserts the full promise: every admitted order is in MySQL for its user, exactly
// once, nothing else is, nothing failed, and both sides add up to the initial stock.
func (w *world) checkNoLoss(tl *tally) final {
	w.t.Helper()
	f := w.final()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	missing, wrong := 0, 0
	for id, u := range tl.admitted {
		got, ok := f.orders[id]
		switch {
		case !ok:
			missing++
		case got != u:
			wrong++
		}
	}
	extra := 0
	for id := range f.orders {
		if _, ok := tl.admitted[id]; !ok {
			extra++
		}
	}
	if missing != 0 || wrong != 0 || extra != 0 || len(f.orders) != len(tl.admitted) {
		w.t.Errorf("admitted %d, MySQL holds %d: %d admitted orders missing, %d under another user, %d never admitted",
			len(tl.admitted), len(f.orders), missing, wrong, extra)
	}
	if f.dupUsers != 0 || f.failed != 0 || len(f.lost) != 0 {
		w.t.Errorf("%d users with two live orders, %d FAILED orders, %d LOST; want 0, 0 and 0", f.dupUsers, f.failed, len(f.lost))
	}
	if f.dbStock+len(f.orders) != w.stock {
		w.t.Errorf("MySQL stock %d + orders %d != initial %d", f.dbStock, len(f.orders), w.stock)
	}
	if f.redisStock+f.buyers != w.stock {
		w.t.Errorf("Redis stock %d + buyers %d != initial %d", f.redisStock, f.buyers, w.stock)
	}
	if f.stream != 0 || f.pending != 0 || f.dead != 0 {
		w.t.Errorf("stream %d, pending %d, dead letters %d; want 0, 0, 0", f.stream, f.pending, f.dead)
	}
	return f
}

func quiet() *slog.Logger {
	if os.Getenv("SECKILL_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// tailBuffer keeps the last max bytes written to it, but for the login codes dev mode logs
// (one record a write): a failure's dump shows the sale, not a thousand logins.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`msg="login code"`)) {
		return len(p), nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if len(b.b) > b.max {
		b.b = append([]byte(nil), b.b[len(b.b)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}
