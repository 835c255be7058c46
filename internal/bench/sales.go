package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/seckill"
)

const salesHelp = `surge bench sales: many flash sales live at once in one server process.

  surge bench sales -inprocess -vouchers 1000 [-servers N] [-users U] [-stock S] [-concurrency C] [config flags]

It builds the app in this process (real Redis and MySQL from the config flags; -seckill-readers
sets the consumer's readers), creates -users users and -vouchers SECKILL vouchers of -stock
units each, all on sale, and warms them. Once the consumer runs it measures the live-but-idle
cost (the consumer's Redis commands per second, goroutines, open file descriptors, RSS), then
every user grabs every voucher (in random order, -concurrency at once), a poller notes when
each voucher's order stream is empty, and each voucher's persistence lag is the time from its
last admission to that moment (p50/p99/max over vouchers). During the grabs it samples the
stream pool's connections, goroutines, file descriptors and RSS; after, it verifies every sale
(orders in MySQL = admitted = min(stock, users), MySQL stock + orders = initial, Redis stock
and buyers agree, no user with two live orders) and measures the idle cost again.

With -servers N (1..8) it builds N apps in this process on the same Redis, MySQL and namespace,
like N servers of one deployment, each with its own Redis clients, database pool and consumer;
setup and verification go through the first, grabs go round-robin over all N. With
-consumer-only K (1..N-1) the last K apps run the consumer and take no grab, the others take
every grab and run no consumer: API servers in front of dedicated order workers, where the
lag is how soon a consumer in another process hears of the new orders. Redis commands
and connections are summed over the N apps (per_server lists each app's); goroutines, file
descriptors and RSS are the whole process's. An HTTP mode against servers is not written yet.

The last stdout line is one JSON object with the figures.
`

// SalesResult is the final JSON line of the sales scenario.
type SalesResult struct {
	Scenario    string `json:"scenario"`
	Redis       string `json:"redis"`
	Database    string `json:"database"`
	Vouchers    int    `json:"vouchers"`
	Users       int    `json:"users"`
	Stock       int    `json:"stock"`
	Concurrency int    `json:"concurrency"`
	Readers     int    `json:"readers"`
	Servers     int    `json:"servers"`
	// ConsumerOnly is how many of the servers run the consumer and take no grab (the others
	// take the grabs and run no consumer); 0: every server does both.
	ConsumerOnly int `json:"consumer_only,omitempty"`

	Idle        SalesCost `json:"idle_before"`
	IdleAfter   SalesCost `json:"idle_after"`
	Peak        SalesCost `json:"peak_during"`
	Grabs       int64     `json:"grabs"`
	Admitted    int64     `json:"admitted"`
	Errors      int64     `json:"errors"`
	FirstError  string    `json:"first_error,omitempty"`
	GrabMS      float64   `json:"grab_ms"`
	GrabsPerS   float64   `json:"grabs_per_s"`
	LagMS       LatencyMS `json:"persistence_lag_ms"` // per voucher: last admission to stream empty
	Undrained   int       `json:"undrained"`
	Violations  []string  `json:"violations,omitempty"`
	OK          bool      `json:"ok"`
	ElapsedMS   float64   `json:"elapsed_ms"`
	SetupMS     float64   `json:"setup_ms"`
	ConsumerCmd string    `json:"consumer_commands_note"`
	// PerServer is each app's share with -servers > 1.
	PerServer []SalesServer `json:"per_server,omitempty"`
}

// SalesServer is one app's share of a -servers run.
type SalesServer struct {
	IdleCommandsPerS      float64 `json:"idle_before_redis_commands_per_s"`
	IdleAfterCommandsPerS float64 `json:"idle_after_redis_commands_per_s"`
	PeakStreamConns       int     `json:"peak_stream_pool_conns"`
	// Persisted is its consumer's surge_seckill_orders_persisted_total, read from its /metrics
	// in process; -1 if that could not be read (e.g. an allowed-hosts list without 127.0.0.1).
	Persisted float64 `json:"orders_persisted"`
}

// SalesCost is what the process holds (and, idle, the consumer's Redis commands per second).
type SalesCost struct {
	CommandsPerS float64 `json:"redis_commands_per_s,omitempty"`
	StreamConns  int     `json:"stream_pool_conns"`
	MainConns    int     `json:"main_pool_conns"`
	Goroutines   int     `json:"goroutines"`
	FDs          int     `json:"open_fds"`
	RSSMB        float64 `json:"rss_mb"`
}

type salesOpts struct {
	vouchers, users, stock, concurrency, servers int
	consumerOnly                                 int
	timeout, drainTimeout, idleFor               time.Duration
}

func runSales(ctx context.Context, args []string, out *output) error {
	fs := flag.NewFlagSet("surge bench sales", flag.ContinueOnError)
	fs.SetOutput(out.errw)
	fs.Usage = func() { fmt.Fprint(out.errw, salesHelp, "\nFlags:\n"); fs.PrintDefaults() }
	build := app.ConfigFlags(fs, nil)
	var o salesOpts
	inprocess := fs.Bool("inprocess", false, "run the service in this process (the only mode so far)")
	fs.IntVar(&o.vouchers, "vouchers", 100, "sales live at once")
	fs.IntVar(&o.servers, "servers", 1, "apps in this process sharing Redis, MySQL and namespace, like servers of one deployment (1..8)")
	fs.IntVar(&o.consumerOnly, "consumer-only", 0, "with -servers N: the last K servers run the consumer and take no grab, the others take every grab and run no consumer")
	fs.IntVar(&o.users, "users", 20, "users; each grabs every voucher once")
	fs.IntVar(&o.stock, "stock", -1, "units per voucher; -1 = users")
	fs.IntVar(&o.concurrency, "concurrency", 64, "grabs in flight at once")
	fs.DurationVar(&o.idleFor, "idle", 5*time.Second, "how long the idle cost is measured, before and after")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on the whole run")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 2*time.Minute, "bound on waiting for the streams to drain")
	jsonOnly := fs.Bool("json-only", false, "print only the final JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out.jsonOnly = *jsonOnly
	cfg, err := build()
	if err != nil {
		return err
	}
	switch {
	case !*inprocess:
		return errors.New("bench sales: give -inprocess (an HTTP mode against servers is not written yet)")
	case o.vouchers < 1 || o.vouchers > 100_000 || o.users < 1 || o.users > 1_000_000:
		return errors.New("bench sales: -vouchers in [1, 100000], -users in [1, 1000000]")
	case o.servers < 1 || o.servers > 8:
		return errors.New("bench sales: -servers in [1, 8]")
	case o.consumerOnly < 0 || o.consumerOnly > 0 && o.consumerOnly >= o.servers:
		return errors.New("bench sales: -consumer-only in [0, -servers - 1]: at least one server takes the grabs")
	case len(cfg.RedisAddrs) == 0 || cfg.MySQLDSN == "":
		return errors.New("bench sales: needs a real Redis and MySQL (-redis-addrs, -mysql-dsn)")
	}
	if o.stock < 0 {
		o.stock = o.users
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	began := time.Now()
	cfg.Seed, cfg.SeckillRate, cfg.SeckillConsumer = false, -1, false
	log := slog.New(slog.NewTextHandler(out.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	defer app.TuneGC(cfg, log)() // as `surge serve` runs it
	apps := make([]*app.App, o.servers)
	for i := range apps {
		if apps[i], err = app.New(ctx, cfg, app.Options{Logger: log, CodeSender: quietSender{}}); err != nil {
			return err
		}
		defer apps[i].Close()
	}
	a := apps[0] // setup, polling and verification
	res := &SalesResult{Scenario: "sales", Vouchers: o.vouchers, Users: o.users, Stock: o.stock, Concurrency: o.concurrency,
		Readers: cfg.SeckillReaders, Servers: o.servers, ConsumerOnly: o.consumerOnly, ConsumerCmd: "commands of the server's Redis clients (main and stream pools) while no grab runs"}
	if o.servers > 1 {
		res.ConsumerCmd = fmt.Sprintf("commands of the %d servers' Redis clients (main and stream pools), summed, while no grab runs", o.servers)
		res.PerServer = make([]SalesServer, o.servers)
	}
	res.Redis, res.Database = describeConfig(cfg)
	out.printf("sales: %d vouchers × %d users (stock %d each), concurrency %d, readers %d, Redis %s\n",
		o.vouchers, o.users, o.stock, o.concurrency, cfg.SeckillReaders, res.Redis)
	if o.servers > 1 {
		out.printf("  %d servers in this process (goroutines, fds and RSS are the whole process's)\n", o.servers)
	}
	if o.consumerOnly > 0 {
		out.printf("  %d take every grab and run no consumer; %d run the consumer and take no grab\n", o.servers-o.consumerOnly, o.consumerOnly)
	}

	users, vouchers, err := salesSetup(ctx, a, o)
	if err != nil {
		return err
	}
	defer salesCleanup(context.WithoutCancel(ctx), a, cfg, vouchers)
	res.SetupMS = ms(time.Since(began))
	hooks := make([]*countHook, len(apps))
	for i, x := range apps {
		hooks[i] = &countHook{}
		x.Redis.AddHook(hooks[i])
		if sc := x.StreamClient(); sc != nil {
			sc.AddHook(hooks[i])
		}
	}
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var consumers sync.WaitGroup
	for _, x := range consuming(apps, o) {
		consumers.Go(func() { _ = x.Seckill.RunConsumer(cctx) })
	}
	defer func() { stop(); consumers.Wait() }()
	time.Sleep(2 * time.Second) // the consumer lists the vouchers, starts what it starts
	var perApp []float64
	res.Idle, perApp = salesIdle(apps, hooks, o.idleFor)
	for i := range res.PerServer {
		res.PerServer[i].IdleCommandsPerS = perApp[i]
	}
	out.printf("  idle with %d live vouchers: %.1f Redis commands/s, %d goroutines, %d fds, stream conns %d, RSS %.0f MB\n",
		o.vouchers, res.Idle.CommandsPerS, res.Idle.Goroutines, res.Idle.FDs, res.Idle.StreamConns, res.Idle.RSSMB)

	lags := salesFire(ctx, apps, o, users, vouchers, res)
	res.LagMS = lags
	out.printf("  %d grabs in %.0f ms (%.0f/s), admitted %d, errors %d; persistence lag per voucher ms p50 %.0f p99 %.0f max %.0f (undrained %d)\n",
		res.Grabs, res.GrabMS, res.GrabsPerS, res.Admitted, res.Errors, lags.P50, lags.P99, lags.Max, res.Undrained)
	out.printf("  peak during: %d goroutines, %d fds, stream conns %d, main conns %d, RSS %.0f MB\n",
		res.Peak.Goroutines, res.Peak.FDs, res.Peak.StreamConns, res.Peak.MainConns, res.Peak.RSSMB)
	res.Violations = salesVerify(ctx, a, cfg, o, vouchers, res.Admitted)
	time.Sleep(3 * time.Second) // what the grabs left (told orders) settles
	res.IdleAfter, perApp = salesIdle(apps, hooks, o.idleFor)
	out.printf("  idle after: %.1f Redis commands/s, %d goroutines, %d fds, stream conns %d\n",
		res.IdleAfter.CommandsPerS, res.IdleAfter.Goroutines, res.IdleAfter.FDs, res.IdleAfter.StreamConns)
	for i := range res.PerServer {
		ps := &res.PerServer[i]
		ps.IdleAfterCommandsPerS, ps.Persisted = perApp[i], persistedBy(apps[i])
		out.printf("  server %d: idle %.1f / after %.1f Redis commands/s, peak stream conns %d, orders persisted %.0f\n",
			i, ps.IdleCommandsPerS, ps.IdleAfterCommandsPerS, ps.PeakStreamConns, ps.Persisted)
	}
	res.OK = len(res.Violations) == 0 && res.Undrained == 0 && res.Errors == 0
	if res.OK {
		out.printf("  verified: every sale exact\n")
	} else {
		out.printf("  VIOLATIONS: %s\n", strings.Join(res.Violations, "; "))
	}
	res.ElapsedMS = ms(time.Since(began))
	if err := out.json(res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("bench sales: %d violation(s), %d undrained, %d errors", len(res.Violations), res.Undrained, res.Errors)
	}
	return nil
}

// salesSetup creates the users and the vouchers (warmed).
func salesSetup(ctx context.Context, a *app.App, o salesOpts) ([]int, []int, error) {
	run := runID()
	users := make([]int, 0, o.users)
	head := fmt.Sprintf("1%d%03d", 5+rand.IntN(5), rand.IntN(1000))
	for start := 0; start < o.users; start += 1000 {
		var bulk []*ent.UserCreate
		for i := start; i < min(o.users, start+1000); i++ {
			bulk = append(bulk, a.DB.Ent.User.Create().SetPhone(fmt.Sprintf("%s%06d", head, i)).SetNickname("bench"))
		}
		us, err := a.DB.Ent.User.CreateBulk(bulk...).Save(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("bench sales: creating users: %w", err)
		}
		for _, u := range us {
			users = append(users, u.ID)
		}
	}
	shopID, err := ensureShop(ctx, a.DB.Ent, run)
	if err != nil {
		return nil, nil, err
	}
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(o.timeout+time.Hour)
	vouchers := make([]int, o.vouchers)
	var next atomic.Int64
	// The first alone: the first order id of a namespace records its fence, which concurrent
	// first warms can deadlock on in MySQL.
	conc := 0
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for i := 0; i < o.vouchers && firstErr.Load() == nil; i += conc {
		conc = min(16, o.vouchers-i)
		if i == 0 {
			conc = 1
		}
		next.Store(int64(i))
		last := int64(i + conc)
		for range conc {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); int64(i) < last && firstErr.Load() == nil; i = int(next.Add(1) - 1) {
					stock := o.stock
					v, err := a.Catalog.CreateVoucher(ctx, catalog.VoucherInput{ShopID: shopID, Title: "bench sales " + run,
						PayValue: 100, ActualValue: 1000, Kind: voucher.KindSECKILL, Stock: &stock, BeginAt: &begin, EndAt: &end})
					if err == nil {
						err = a.Seckill.Warm(ctx, v.ID)
					}
					if err != nil {
						firstErr.CompareAndSwap(nil, &err)
						return
					}
					vouchers[i] = v.ID
				}
			})
		}
		wg.Wait()
	}
	if p := firstErr.Load(); p != nil {
		return nil, nil, fmt.Errorf("bench sales: creating vouchers: %w", *p)
	}
	return users, vouchers, nil
}

// salesCleanup ends the sales and deletes their Redis keys.
func salesCleanup(ctx context.Context, a *app.App, cfg app.Config, vouchers []int) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	now := time.Now().UTC()
	for _, v := range vouchers {
		if v != 0 {
			_, _ = a.DB.Ent.Voucher.UpdateOneID(v).SetEndAt(now).Save(ctx)
			_ = dropSale(ctx, a.Redis, cfg, v)
		}
	}
}

// consuming are the apps that run a consumer; grabbing those that take the grabs.
func consuming(apps []*app.App, o salesOpts) []*app.App {
	if o.consumerOnly == 0 {
		return apps
	}
	return apps[len(apps)-o.consumerOnly:]
}

func grabbing(apps []*app.App, o salesOpts) []*app.App {
	if o.consumerOnly == 0 {
		return apps
	}
	return apps[:len(apps)-o.consumerOnly]
}

// salesFire grabs every voucher for every user, job i through the i % n-th of the n apps that
// take grabs, and returns the per-voucher persistence lag.
func salesFire(ctx context.Context, apps []*app.App, o salesOpts, users, vouchers []int, res *SalesResult) LatencyMS {
	a := apps[0]
	grabbers := grabbing(apps, o)
	n := len(vouchers)
	last := make([]atomic.Int64, n)
	unanswered := make([]atomic.Int64, n) // grabs still to answer, per voucher
	for i := range unanswered {
		unanswered[i].Store(int64(len(users)))
	}
	type job struct{ v, u int }
	jobs := make([]job, 0, n*len(users))
	for i := range vouchers {
		for _, u := range users {
			jobs = append(jobs, job{i, u})
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

	sampleStop := make(chan struct{})
	sampled := make(chan SalesCost)
	go func() {
		var peak SalesCost
		// A last sample at the stop: a run shorter than the period would miss the connections
		// the consumers opened (they stay in their pools).
		for stopped := false; ; {
			c := salesCost(apps)
			peak.StreamConns, peak.MainConns = max(peak.StreamConns, c.StreamConns), max(peak.MainConns, c.MainConns)
			peak.Goroutines, peak.FDs, peak.RSSMB = max(peak.Goroutines, c.Goroutines), max(peak.FDs, c.FDs), max(peak.RSSMB, c.RSSMB)
			for i := range res.PerServer {
				res.PerServer[i].PeakStreamConns = max(res.PerServer[i].PeakStreamConns, streamConns(apps[i]))
			}
			if stopped {
				sampled <- peak
				return
			}
			select {
			case <-sampleStop:
				stopped = true
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	drainedAt := make([]time.Time, n)
	pollDone := make(chan struct{})
	pollCtx, pollCancel := context.WithCancel(ctx)
	defer pollCancel()
	grabsDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		keyPrefix := seckill.KeyPrefix(a.Config.Namespace, seckill.DefaultPrefix)
		deadline := time.Time{}
		for left := n; left > 0 && pollCtx.Err() == nil; {
			select {
			case <-grabsDone:
				if deadline.IsZero() {
					deadline = time.Now().Add(o.drainTimeout)
				}
			default:
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				return
			}
			pipe := a.Redis.Pipeline()
			lens := make([]*redis.IntCmd, n)
			for i, v := range vouchers {
				if drainedAt[i].IsZero() && last[i].Load() != 0 && unanswered[i].Load() == 0 {
					lens[i] = pipe.XLen(pollCtx, seckill.KeysOf(keyPrefix, v).Orders)
				}
			}
			_, _ = pipe.Exec(pollCtx)
			now := time.Now()
			for i := range vouchers {
				// A voucher is drained once every grab of it has been answered and its stream
				// is empty.
				if lens[i] != nil && lens[i].Err() == nil && lens[i].Val() == 0 && unanswered[i].Load() == 0 {
					drainedAt[i], left = now, left-1
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	_ = pollDone

	var next, grabs, admitted, errs atomic.Int64
	var firstErr atomic.Pointer[string]
	start := time.Now()
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(jobs)) && ctx.Err() == nil; i = next.Add(1) - 1 {
				j := jobs[i]
				_, err := grabbers[i%int64(len(grabbers))].Seckill.Grab(ctx, j.u, vouchers[j.v])
				grabs.Add(1)
				switch {
				case err == nil:
					admitted.Add(1)
					last[j.v].Store(time.Now().UnixNano())
				case errors.Is(err, seckill.ErrSoldOut), errors.Is(err, seckill.ErrAlreadyPurchased):
				default:
					if errs.Add(1) == 1 {
						s := err.Error()
						firstErr.Store(&s)
					}
				}
				unanswered[j.v].Add(-1)
			}
		})
	}
	wg.Wait()
	res.GrabMS = ms(time.Since(start))
	close(grabsDone)
	<-pollDone
	close(sampleStop)
	res.Peak = <-sampled
	res.Grabs, res.Admitted, res.Errors = grabs.Load(), admitted.Load(), errs.Load()
	res.GrabsPerS = float64(res.Grabs) / time.Since(start).Seconds()
	if p := firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	var lags []time.Duration
	for i := range vouchers {
		switch {
		case last[i].Load() == 0:
		case drainedAt[i].IsZero():
			res.Undrained++
		default:
			lags = append(lags, max(0, drainedAt[i].Sub(time.Unix(0, last[i].Load()))))
		}
	}
	return latencySummary(lags)
}

func latencySummary(d []time.Duration) LatencyMS {
	if len(d) == 0 {
		return LatencyMS{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	at := func(q float64) float64 { return ms(d[min(len(d)-1, int(q*float64(len(d))))]) }
	return LatencyMS{N: len(d), Mean: ms(sum / time.Duration(len(d))), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: ms(d[len(d)-1])}
}

// salesVerify checks every sale in MySQL and Redis.
func salesVerify(ctx context.Context, a *app.App, cfg app.Config, o salesOpts, vouchers []int, admitted int64) []string {
	var bad []string
	want := min(o.stock, o.users)
	keyPrefix := seckill.KeyPrefix(cfg.Namespace, seckill.DefaultPrefix)
	if admitted != int64(want*len(vouchers)) {
		bad = append(bad, fmt.Sprintf("admitted %d, want %d", admitted, want*len(vouchers)))
	}
	for _, v := range vouchers {
		var orders, users, stock int
		row := a.DB.SQL.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT user_id) FROM tb_voucher_order WHERE voucher_id = ? AND status NOT IN ('FAILED','LOST')", v)
		if err := row.Scan(&orders, &users); err != nil {
			return append(bad, err.Error())
		}
		if err := a.DB.SQL.QueryRowContext(ctx, "SELECT stock FROM vouchers WHERE id = ?", v).Scan(&stock); err != nil {
			return append(bad, err.Error())
		}
		k := seckill.KeysOf(keyPrefix, v)
		rs, _ := a.Redis.Get(ctx, k.Stock).Int()
		buyers, _ := a.Redis.HLen(ctx, k.Buyers).Result()
		if orders != want || users != orders || stock+orders != o.stock || rs != stock || int(buyers) != orders {
			bad = append(bad, fmt.Sprintf("voucher %d: %d orders (%d users), MySQL stock %d, Redis stock %d, buyers %d; want %d orders",
				v, orders, users, stock, rs, buyers, want))
		}
		if len(bad) > 20 {
			break
		}
	}
	return bad
}

// salesIdle measures the process's cost while no grab runs: the Redis commands/s of all apps
// (hooks[i] counts apps[i]'s clients), summed, and each app's.
func salesIdle(apps []*app.App, hooks []*countHook, d time.Duration) (SalesCost, []float64) {
	from, start := make([]int64, len(hooks)), time.Now()
	for i, h := range hooks {
		from[i] = h.n.Load()
	}
	time.Sleep(d)
	c := salesCost(apps)
	took := time.Since(start).Seconds()
	perApp := make([]float64, len(hooks))
	for i, h := range hooks {
		perApp[i] = float64(h.n.Load()-from[i]) / took
		c.CommandsPerS += perApp[i]
	}
	return c, perApp
}

// salesCost is the process's goroutines, fds and RSS, and the apps' Redis connections summed.
func salesCost(apps []*app.App) SalesCost {
	c := SalesCost{Goroutines: runtime.NumGoroutine(), FDs: openFDs(), RSSMB: rssMB()}
	for _, a := range apps {
		c.StreamConns += streamConns(a)
		c.MainConns += int(a.Redis.PoolStats().TotalConns)
	}
	return c
}

func streamConns(a *app.App) int {
	if sc := a.StreamClient(); sc != nil {
		return int(sc.PoolStats().TotalConns)
	}
	return 0
}

// persistedBy reads the orders a's consumer wrote from a's /metrics, served in process (the
// registry is not exported); -1 if it cannot be read.
func persistedBy(a *app.App) float64 {
	h := a.AdminHandler
	if h == nil {
		h = a.Handler
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Host = "127.0.0.1" // what a dev server's allowed hosts admit
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	m, err := parseMetrics(rec.Body)
	if rec.Code != http.StatusOK || err != nil {
		return -1
	}
	if v, ok := m["surge_seckill_orders_persisted_total"]; ok {
		return v
	}
	return -1
}

func openFDs() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(fds)
}

// countHook counts the commands a Redis client sends (each command of a pipeline).
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}
