package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/wait"
	"github.com/surgekit/surge/seckill"
)

const subscriptionsHelp = `surge bench subscriptions: live updates under load, over a real graphql-transport-ws client.

  surge bench subscriptions [-orders N] [-stock M] [-idle 5s] [-server-process | -target URL -server-pid PID] [config flags]

The bench builds the app in this process (app.New on the config's Redis and MySQL; MySQL is
needed for the SQL count) for logins, grabs and the consumer. The server the clients talk to is

  (default)         this app, served on a loopback port: server and client share one process,
                    so CPU, RSS and goroutines are those of both;
  -server-process   this binary re-executed as "surge serve" with the same config flags on a
                    loopback port (killed at the end): the server's CPU and RSS come from
                    /proc/<pid>, its goroutines from its /metrics (go_goroutines);
  -target URL       a server someone started on the same Redis, MySQL and namespace (dev mode,
                    -seckill-consumer=false, -ws-max-connections-per-ip above max(N, M), /metrics
                    on URL), with -server-pid its process id on this machine.

max(N, M) users log in; each opens one WebSocket connection (connection_init with its token);
M of them subscribe voucherStock to one voucher. The N buyers then grab it (this process's
service API, 100 at a time) and subscribe orderStatus to their order, which stays QUEUED: the
consumer is not running yet. During the idle window nothing changes and the tool measures what
the server spends on the open subscriptions: Redis commands/s (the server's; the whole Redis,
INFO commandstats), SQL/s (MariaDB's global Questions), the server's CPU, RSS and goroutines,
and per subscription the server's goroutines and RSS above its figures before the first
connection. Then this process starts the consumer and measures, per order, CREATED's arrival
at the client after the CREATED event was published (the bench listens on the event channel
itself; the event leaves right after the row's commit), and per stock watcher the arrival of
the final stock after the last grab. The last stdout line is one JSON object.

Measured on the 2-core machine, -server-process, 10 000 + 10 000 (docs/benchmarks.md): server
idle CPU 0.9 %, 2.5 Redis commands/s, no SQL of its own but 4 Hub reads in 10 s (the sweeps),
CREATED p50 13 / p99 38 ms, 10 061 goroutines (0.50 per subscription), RSS 756 MB (36.5 KB
per subscription, the GC's headroom included; what a subscription keeps, heap and stacks after
a GC, is about 9.5 KB: TestIdleSubscriptionMemory; medians of 3).
`

// SubscriptionsResult is the JSON line of bench subscriptions. The server's figures (CPU, RSS,
// goroutines) are the whole process's in the default in-process mode, where client and server
// share it.
type SubscriptionsResult struct {
	Scenario          string    `json:"scenario"`
	Server            string    `json:"server"` // "in-process", "process" or "target"
	OrderWatchers     int       `json:"order_watchers"`
	StockWatchers     int       `json:"stock_watchers"`
	Connections       int       `json:"connections"`
	SubscribeS        float64   `json:"subscribe_s"`
	IdleS             float64   `json:"idle_s"`
	IdleAppRedisCmdsS float64   `json:"idle_app_redis_cmds_per_s"` // the server's: its client's commands in process, else its pool round trips (/metrics)
	IdleRedisCmdsS    float64   `json:"idle_redis_cmds_per_s"`     // whole server: other clients count too
	IdleSQLS          float64   `json:"idle_sql_per_s"`            // MariaDB global Questions: other clients count too
	IdleHubReads      int64     `json:"idle_hub_reads"`            // the server's live Hub reads (SQL or Redis) in the window
	IdleCPUPct        float64   `json:"idle_cpu_pct"`              // the server process
	RSSMB             float64   `json:"rss_mb"`                    // the server process, idle
	Goroutines        int       `json:"goroutines"`                // the server process, idle
	HeapInuseMB       float64   `json:"heap_inuse_mb"`             // the server's Go heap in use, idle (go_memstats_heap_inuse_bytes)
	StackInuseMB      float64   `json:"stack_inuse_mb"`            // its goroutine stacks (go_memstats_stack_inuse_bytes)
	BaseRSSMB         float64   `json:"base_rss_mb"`               // the server before the first connection
	BaseGoroutines    int       `json:"base_goroutines"`
	GoroutinesPerSub  float64   `json:"goroutines_per_subscription"` // (idle − base) / (N + M)
	KBPerSub          float64   `json:"kb_per_subscription"`         // RSS (idle − base) / (N + M)
	ClientCPUPct      float64   `json:"client_cpu_pct"`              // this process in the idle window
	ClientRSSMB       float64   `json:"client_rss_mb"`
	CreatedDelivered  int       `json:"created_delivered"`
	CreatedMS         LatencyMS `json:"created_latency_ms"`
	StockDelivered    int       `json:"stock_delivered"`
	StockMS           LatencyMS `json:"stock_latency_ms"`
}

// subscriptionsFlags are the bench's own flags; the others are the config's, which
// -server-process passes on to the server.
var subscriptionsFlags = map[string]bool{"orders": true, "stock": true, "idle": true, "timeout": true,
	"cpuprofile": true, "json-only": true, "server-process": true, "target": true, "server-pid": true}

func runSubscriptions(ctx context.Context, args []string, out *output) error {
	fs := flag.NewFlagSet("surge bench subscriptions", flag.ContinueOnError)
	fs.SetOutput(out.errw)
	fs.Usage = func() {
		fmt.Fprint(out.errw, subscriptionsHelp, "\nFlags:\n")
		fs.PrintDefaults()
	}
	build := app.ConfigFlags(fs, nil)
	nOrders := fs.Int("orders", 1000, "orderStatus watchers (buyers, one grab each)")
	nStock := fs.Int("stock", 1000, "voucherStock watchers")
	idle := fs.Duration("idle", 5*time.Second, "the idle window")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole run")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the idle window (this process) to this file")
	jsonOnly := fs.Bool("json-only", false, "print only the final JSON line")
	serverProcess := fs.Bool("server-process", false, `run the server as a separate process: this binary as "surge serve" with the same config flags`)
	target := fs.String("target", "", "base URL of a running server (http://127.0.0.1:8080) instead of one of the bench's; needs -server-pid")
	serverPID := fs.Int("server-pid", 0, "process id of the -target server, for its CPU and RSS (/proc)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out.jsonOnly = *jsonOnly
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("bench subscriptions: unexpected argument %q", fs.Arg(0))
	case *nOrders < 1 || *nStock < 0 || *nOrders > 100_000 || *nStock > 100_000:
		return errors.New("bench subscriptions: -orders in [1, 100000], -stock in [0, 100000]")
	case *idle <= 0 || *timeout <= 0:
		return errors.New("bench subscriptions: -idle and -timeout must be positive")
	case *target != "" && (*serverPID <= 0 || *serverProcess):
		return errors.New("bench subscriptions: -target needs -server-pid, and excludes -server-process")
	}
	// Dev mode before the config is built: login codes come back, and its defaults (no login
	// send rate limits) hold for the thousands of logins.
	_ = fs.Set("mode", "dev")
	cfg, err := build()
	if err != nil {
		return err
	}
	if cfg.MySQLDSN == "" || len(cfg.RedisAddrs) == 0 {
		return errors.New("bench subscriptions: give a real Redis and MySQL (-redis-addrs, -mysql-dsn)")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	conns := max(*nOrders, *nStock)
	mode := "in-process"
	switch {
	case *serverProcess:
		mode = "process"
	case *target != "":
		mode = "target"
	}
	// Each connection is a file descriptor at both ends (Go raises the soft limit to the hard
	// one at start): in process, client and server need two.
	fds := conns
	if mode == "in-process" {
		fds = 2 * conns
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && uint64(fds)+200 > lim.Cur {
		return fmt.Errorf("bench subscriptions: %d connections need %d file descriptors in this process, the limit is %d (ulimit -n; -server-process halves the need)", conns, fds+200, lim.Cur)
	}
	cfg.Mode, cfg.Seed, cfg.SeckillRate, cfg.SeckillConsumer = "dev", false, -1, false
	cfg.WSMaxConnectionsPerIP = conns + 10
	log := slog.New(slog.NewTextHandler(out.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	defer app.TuneGC(cfg, log)() // as `surge serve` runs it
	a, err := app.New(ctx, cfg, app.Options{Logger: log, CodeSender: quietSender{}})
	if err != nil {
		return err
	}
	defer a.Close()
	cmds := &cmdCounter{}
	a.Redis.AddHook(cmds)

	var srv *benchServer
	switch mode {
	case "process":
		var pass []string
		fs.Visit(func(f *flag.Flag) {
			if !subscriptionsFlags[f.Name] {
				pass = append(pass, "-"+f.Name+"="+f.Value.String())
			}
		})
		srv, err = startServerProcess(ctx, pass, conns, out)
	case "target":
		srv = &benchServer{base: strings.TrimSuffix(*target, "/"), pid: *serverPID}
	default:
		srv, err = startServerInProcess(a, cmds)
	}
	if err != nil {
		return err
	}
	defer srv.stop()
	url := "ws" + strings.TrimPrefix(srv.base, "http") + "/query"
	res := &SubscriptionsResult{Scenario: "subscriptions", Server: mode, OrderWatchers: *nOrders, StockWatchers: *nStock, Connections: conns}
	base, err := srv.sample(ctx)
	if err != nil {
		return err
	}
	res.BaseRSSMB, res.BaseGoroutines = round3(base.rssMB), base.goroutines

	run := runID()
	shopID, err := ensureShop(ctx, a.DB.Ent, run)
	if err != nil {
		return err
	}
	stock := *nOrders
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	v, err := a.Catalog.CreateVoucher(ctx, catalog.VoucherInput{
		ShopID: shopID, Title: "bench subscriptions " + run, PayValue: 100, ActualValue: 1000,
		Kind: voucher.KindSECKILL, Stock: &stock, BeginAt: &begin, EndAt: &end,
	})
	if err != nil {
		return err
	}
	defer func() { _ = dropSale(context.WithoutCancel(ctx), a.Redis, cfg, v.ID) }()
	if err := a.Seckill.Warm(ctx, v.ID); err != nil {
		return err
	}

	// Log in and connect, 64 at a time.
	_, ph := phones(conns)
	clients := make([]*wsWatcher, conns)
	start := time.Now()
	if err := parallel(ctx, conns, 64, func(i int) error {
		sent, err := a.Auth.SendCode(ctx, ph[i])
		if err != nil {
			return err
		}
		token, usr, err := a.Auth.Login(ctx, ph[i], sent.DevCode)
		if err != nil {
			return err
		}
		c, err := dialWatcher(ctx, url, token)
		if err != nil {
			return err
		}
		c.user = usr.ID
		clients[i] = c
		if i < *nStock {
			return c.subscribe(ctx, "s", `subscription($v: ID!) { voucherStock(voucherId: $v) }`, map[string]any{"v": strconv.Itoa(v.ID)})
		}
		return nil
	}); err != nil {
		return fmt.Errorf("bench subscriptions: connecting: %w", err)
	}
	defer func() {
		for _, c := range clients {
			if c != nil {
				_ = c.conn.CloseNow()
			}
		}
	}()
	out.printf("  %d users logged in and connected, %d stock watchers, in %.1f s\n", conns, *nStock, time.Since(start).Seconds())

	// The grabs, then the order subscriptions.
	orders := make([]int64, *nOrders)
	if err := parallel(ctx, *nOrders, 100, func(i int) error {
		ad, err := a.Seckill.Grab(ctx, clients[i].user, v.ID)
		orders[i] = ad.OrderID
		return err
	}); err != nil {
		return fmt.Errorf("bench subscriptions: grabs: %w", err)
	}
	lastGrab := time.Now()
	subStart := time.Now()
	if err := parallel(ctx, *nOrders, 64, func(i int) error {
		return clients[i].subscribe(ctx, "o", `subscription($o: ID!) { orderStatus(orderId: $o) }`, map[string]any{"o": strconv.FormatInt(orders[i], 10)})
	}); err != nil {
		return fmt.Errorf("bench subscriptions: subscribing: %w", err)
	}
	if err := waitAll(ctx, clients[:*nOrders], func(c *wsWatcher) bool { return c.queued.Load() }); err != nil {
		return fmt.Errorf("bench subscriptions: waiting for QUEUED: %w", err)
	}
	res.SubscribeS = round3(time.Since(subStart).Seconds())
	out.printf("  %d grabs, %d order subscriptions QUEUED in %.1f s\n", *nOrders, *nOrders, res.SubscribeS)
	final := strconv.Itoa(stock - *nOrders)
	if err := waitAll(ctx, clients[:*nStock], func(c *wsWatcher) bool { return c.stockAt(final) != nil }); err != nil {
		return fmt.Errorf("bench subscriptions: waiting for the final stock: %w", err)
	}
	var stockLat []time.Duration
	for _, c := range clients[:*nStock] {
		stockLat = append(stockLat, max(0, c.stockAt(final).Sub(lastGrab)))
	}
	slices.Sort(stockLat)
	res.StockDelivered, res.StockMS = len(stockLat), latencyMS(stockLat)

	// The idle window.
	time.Sleep(time.Second) // the last throttled messages, the first sweep
	info := redis.NewClient(&redis.Options{Addr: cfg.RedisAddrs[0], Password: cfg.RedisPassword})
	defer info.Close()
	s0, err := srv.sample(ctx)
	if err != nil {
		return err
	}
	r0, q0, cpu0, t0 := totalCalls(ctx, info), questions(ctx, a), procCPU(os.Getpid()), time.Now()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		wait.Sleep(ctx, *idle)
		pprof.StopCPUProfile()
	} else {
		wait.Sleep(ctx, *idle)
	}
	r1, q1, cpu1, t1 := totalCalls(ctx, info), questions(ctx, a), procCPU(os.Getpid()), time.Now()
	s1, err := srv.sample(ctx)
	if err != nil {
		return err
	}
	el := t1.Sub(t0).Seconds()
	res.IdleS = round3(el)
	res.IdleRedisCmdsS = round3(float64(r1-r0-2) / el) // less our own two INFO calls
	res.IdleAppRedisCmdsS = round3(float64(s1.redis-s0.redis) / s1.at.Sub(s0.at).Seconds())
	res.IdleSQLS = round3(float64(q1-q0-1) / el) // less our own SHOW STATUS
	res.IdleHubReads = s1.hubReads - s0.hubReads
	res.IdleCPUPct = round3(100 * (s1.cpu - s0.cpu).Seconds() / s1.at.Sub(s0.at).Seconds())
	res.RSSMB, res.Goroutines = round3(s1.rssMB), s1.goroutines
	res.HeapInuseMB, res.StackInuseMB = round3(s1.heapMB), round3(s1.stackMB)
	subs := float64(*nOrders + *nStock)
	res.GoroutinesPerSub = round3(float64(s1.goroutines-base.goroutines) / subs)
	res.KBPerSub = round3((s1.rssMB - base.rssMB) * 1024 / subs)
	res.ClientCPUPct = round3(100 * (cpu1 - cpu0).Seconds() / el)
	res.ClientRSSMB = rssMB()
	out.printf("  idle %.0f s: server Redis %.1f cmds/s (whole Redis %.1f/s), SQL %.1f/s (whole MariaDB), hub reads %d\n",
		el, res.IdleAppRedisCmdsS, res.IdleRedisCmdsS, res.IdleSQLS, res.IdleHubReads)
	out.printf("  server (%s): CPU %.1f %%, RSS %.0f MB (%.0f before connections; Go heap in use %.0f MB, stacks %.0f MB), %d goroutines (%d before); per subscription %.2f goroutines, %.1f KB; client CPU %.1f %%, RSS %.0f MB\n",
		mode, res.IdleCPUPct, res.RSSMB, res.BaseRSSMB, res.HeapInuseMB, res.StackInuseMB, res.Goroutines, res.BaseGoroutines, res.GoroutinesPerSub, res.KBPerSub, res.ClientCPUPct, res.ClientRSSMB)

	// The consumer persists; CREATED latency against the event's publication.
	events := a.Redis.Subscribe(ctx, a.Seckill.EventChannel())
	defer events.Close()
	if _, err := events.Receive(ctx); err != nil { // the subscription's confirmation
		return err
	}
	var mu sync.Mutex
	published := map[int64]time.Time{}
	go func() {
		for m := range events.Channel() {
			at := time.Now()
			b, err := seckill.ParseBatch(m.Payload)
			if err != nil {
				continue
			}
			mu.Lock()
			for _, ev := range b.Events {
				if ev.Status == "CREATED" {
					published[ev.Order] = at
				}
			}
			mu.Unlock()
		}
	}()
	cctx, stopCons := context.WithCancel(ctx)
	consDone := make(chan struct{})
	go func() { defer close(consDone); _ = a.Seckill.RunConsumer(cctx) }()
	defer func() { stopCons(); <-consDone }()
	if err := waitAll(ctx, clients[:*nOrders], func(c *wsWatcher) bool { return c.created() != nil }); err != nil {
		return fmt.Errorf("bench subscriptions: waiting for CREATED: %w", err)
	}
	time.Sleep(50 * time.Millisecond)
	var created []time.Duration
	mu.Lock()
	for i, c := range clients[:*nOrders] {
		if p, ok := published[orders[i]]; ok {
			created = append(created, max(0, c.created().Sub(p)))
		}
	}
	mu.Unlock()
	slices.Sort(created)
	res.CreatedDelivered, res.CreatedMS = len(created), latencyMS(created)
	out.printf("  CREATED to %d watchers (%d timed): p50 %.1f ms, p99 %.1f ms after the event; final stock to %d watchers: p50 %.1f ms, p99 %.1f ms after the last grab\n",
		*nOrders, len(created), res.CreatedMS.P50, res.CreatedMS.P99, res.StockDelivered, res.StockMS.P50, res.StockMS.P99)
	return out.json(res)
}

// parallel runs fn(0..n-1) on conc workers; the first error stops it.
func parallel(ctx context.Context, n, conc int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for first.Load() == nil && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return ctx.Err()
}

func waitAll(ctx context.Context, cs []*wsWatcher, ok func(*wsWatcher) bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n := 0
		for _, c := range cs {
			if ok(c) {
				n++
			}
		}
		if n == len(cs) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d after 2 min", n, len(cs))
		}
		if !wait.Sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// wsWatcher is one graphql-transport-ws connection of the bench.
type wsWatcher struct {
	conn   *websocket.Conn
	user   int
	mu     sync.Mutex
	stock  map[string]time.Time // first arrival of each stock value
	done   time.Time            // CREATED's arrival
	queued atomic.Bool
}

func (c *wsWatcher) stockAt(v string) *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.stock[v]; ok {
		return &t
	}
	return nil
}

func (c *wsWatcher) created() *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done.IsZero() {
		return nil
	}
	t := c.done
	return &t
}

func dialWatcher(ctx context.Context, url, token string) (*wsWatcher, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	c := &wsWatcher{conn: conn, stock: map[string]time.Time{}}
	if err := c.send(dctx, map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}}); err != nil {
		return nil, err
	}
	_, data, err := conn.Read(dctx)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(data), "connection_ack") {
		return nil, fmt.Errorf("connection_init answered %s", data)
	}
	go c.read()
	return c, nil
}

func (c *wsWatcher) send(ctx context.Context, v any) error {
	data, _ := json.Marshal(v)
	return c.conn.Write(ctx, websocket.MessageText, data)
}

func (c *wsWatcher) subscribe(ctx context.Context, id, query string, vars map[string]any) error {
	return c.send(ctx, map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
}

func (c *wsWatcher) read() {
	for {
		_, data, err := c.conn.Read(context.Background())
		if err != nil {
			return
		}
		at := time.Now()
		var m struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Payload struct {
				Data map[string]any `json:"data"`
			} `json:"payload"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m.Type == "ping" {
			_ = c.conn.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		}
		if m.Type != "next" {
			continue
		}
		c.mu.Lock()
		switch m.ID {
		case "s":
			v := fmt.Sprint(m.Payload.Data["voucherStock"])
			if _, ok := c.stock[v]; !ok {
				c.stock[v] = at
			}
		case "o":
			switch m.Payload.Data["orderStatus"] {
			case "QUEUED":
				c.queued.Store(true)
			case "CREATED":
				c.done = at
				c.queued.Store(true)
			}
		}
		c.mu.Unlock()
	}
}

// totalCalls sums the calls of INFO commandstats.
func totalCalls(ctx context.Context, rdb *redis.Client) int64 {
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0
	}
	var n int64
	for l := range strings.SplitSeq(s, "\n") {
		if i := strings.Index(l, "calls="); i >= 0 {
			f := strings.SplitN(l[i+6:], ",", 2)[0]
			c, _ := strconv.ParseInt(f, 10, 64)
			n += c
		}
	}
	return n
}

func questions(ctx context.Context, a *app.App) int64 {
	var name string
	var n int64
	_ = a.DB.SQL.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n)
	return n
}
