package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/seckill"
)

const drainHelp = `surge bench drain: how fast the order stream consumer writes admitted orders into MySQL,
next to raw 500-row multi-value INSERTs of the same rows, in the same run.

  SURGE_REDIS_ADDRS=127.0.0.1:6379 SURGE_MYSQL_DSN='user:pass@tcp(127.0.0.1:3306)/surge' surge bench drain [-orders N] [-batch B]

It inserts -orders users in bulk (the orders reference them), creates a SECKILL voucher (stock
= orders), admits every user once through the real admission script (pipelined EVALSHA of
lua/seckill_grab.lua), so the voucher's stream holds N orders, then starts Service.RunConsumer
(-batch: its batch size, 1 000 by default) and polls XLEN until the stream is empty: rows/s from the first batch
persisted to the last (and from the consumer's start). The raw baseline writes the same rows
into tb_voucher_order with plain INSERT ... VALUES (...),(...) statements of 500 rows on one
connection (autocommit), before and after the drain (deleting them after each, and once
before, unmeasured, so that every measured pass follows the same deletion), with Go's
default collector (the server's heap floor, SURGE_GC_MIN_HEAP_MB, slows such a client), and
the ratio is ours / the mean raw rate. It also counts the Redis commands the consumer sent per batch,
by name, and the CPU the raw INSERTs and the drain cost per 1 000 rows: MySQL's server process
(when it runs on this machine and its pid file is readable), Redis's (INFO cpu) and this
process's: on a busy machine, where the rates move with everything else, these say what the
rows cost. -cpuprofile profiles this process during the drain. Needs real MySQL and Redis (the
embedded default is refused).
Everything the run creates (users, voucher, orders, Redis keys) is deleted at the end.
`

// DrainResult is the final JSON line of the drain scenario.
type DrainResult struct {
	Scenario  string `json:"scenario"`
	Redis     string `json:"redis"`
	Run       string `json:"run"`
	Namespace string `json:"namespace"`
	Orders    int    `json:"orders"`
	Batch     int    `json:"batch"`
	VoucherID int    `json:"voucher_id"`

	FillMS           float64 `json:"fill_ms"`
	DrainMS          float64 `json:"drain_ms"`               // consumer start -> stream empty
	FirstToLastMS    float64 `json:"drain_first_to_last_ms"` // first batch persisted -> stream empty
	RowsFirstToLast  int     `json:"rows_first_to_last"`
	OursRowsPerS     float64 `json:"ours_rows_per_s"` // first to last
	OursFromStartRPS float64 `json:"ours_rows_per_s_from_start"`
	RawBeforeRowsPS  float64 `json:"raw_rows_per_s_before"`
	RawAfterRowsPS   float64 `json:"raw_rows_per_s_after"`
	RawRowsPerS      float64 `json:"raw_rows_per_s"`
	Ratio            float64 `json:"ratio_ours_vs_raw"`
	// CommandsPerBatch is the Redis commands the process sent while the consumer drained, by
	// name, per batch of Batch orders (the bench's own XLEN polling left out).
	CommandsPerBatch map[string]float64 `json:"redis_commands_per_batch,omitempty"`
	CPUProfile       string             `json:"cpu_profile,omitempty"`
	// RawCPU and OursCPU are the CPU the raw INSERTs (before the drain) and the drain took,
	// in ms per 1 000 rows: what the rows cost the machine, whatever else runs on it.
	RawCPU     *DrainCPU `json:"raw_cpu_ms_per_1k_rows,omitempty"`
	OursCPU    *DrainCPU `json:"ours_cpu_ms_per_1k_rows,omitempty"`
	OrdersInDB int       `json:"orders_in_db"`
	StockDB    int       `json:"stock_db"`
	OK         bool      `json:"ok"`
	ElapsedMS  float64   `json:"elapsed_ms"`
}

// DrainCPU is CPU time per 1 000 rows: MySQL's server process (when it runs on this machine
// and says where its pid file is; -1 otherwise), Redis's (INFO cpu, every master) and this
// process's.
type DrainCPU struct {
	MySQL float64 `json:"mysql"`
	Redis float64 `json:"redis"`
	Bench float64 `json:"bench_process"`
}

// cpuClock reads the CPU the three have used so far.
type cpuClock struct {
	mysql, redis, self time.Duration
	mysqlOK            bool
}

func (d *drain) cpuNow() cpuClock {
	var c cpuClock
	if d.mysqlPID == 0 {
		var pidFile string
		d.mysqlPID = -1
		if d.app.DB.SQL.QueryRowContext(d.ctx, "SELECT @@pid_file").Scan(&pidFile) == nil {
			if b, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					d.mysqlPID = pid
				}
			}
		}
	}
	if d.mysqlPID > 0 {
		c.mysql, c.mysqlOK = procCPU(d.mysqlPID), true
	}
	if stats, err := masterStats(d.ctx, d.app.Redis); err == nil {
		for _, st := range stats {
			c.redis += time.Duration(st.cpu * float64(time.Second))
		}
	}
	c.self = procCPU(os.Getpid())
	return c
}

// perKRows is the CPU used since from, per 1 000 of n rows.
func (c cpuClock) perKRows(from cpuClock, n int) *DrainCPU {
	per := func(d time.Duration) float64 { return round3(ms(d) * 1000 / float64(n)) }
	out := &DrainCPU{MySQL: -1, Redis: per(c.redis - from.redis), Bench: per(c.self - from.self)}
	if c.mysqlOK {
		out.MySQL = per(c.mysql - from.mysql)
	}
	return out
}

type drainRow struct {
	id   int64
	user int
	at   int64 // Unix ms
}

// drain is one run of the drain scenario: its setup and what it created, for the phases.
type drain struct {
	ctx   context.Context
	cfg   app.Config
	prof  string // -cpuprofile
	batch int    // -batch: the consumer's BatchSize
	app   *app.App
	svc   *seckill.Service
	out   *output
	n     int
	res   DrainResult
	head  string // the phone prefix of the users it inserted
	vid   int    // the voucher it created (0: none yet)
	users []int
	rows  []drainRow
	// mysqlPID is the database server's process (0: not looked up, -1: not found).
	mysqlPID int
	log      *slog.Logger
	stopGC   func() // stops the collector's tuning (app.TuneGC), as surge serve runs it
}

func runDrain(ctx context.Context, args []string, out *output) error {
	cfg, n, batch, timeout, prof, err := drainFlags(args, out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	d := &drain{ctx: ctx, cfg: cfg, out: out, n: n, batch: batch, prof: prof}
	d.res = DrainResult{Scenario: "drain", Redis: strings.Join(cfg.RedisAddrs, ","), Run: runID(), Namespace: cfg.Namespace, Orders: n}
	closeAll, err := d.open()
	if err != nil {
		return err
	}
	defer closeAll()
	defer d.cleanup()
	for _, phase := range []func() error{d.insertUsers, func() error { return d.createVoucher(timeout) }, d.orderRows} {
		if err := phase(); err != nil {
			return err
		}
	}
	if err := d.measure(); err != nil {
		return err
	}
	d.res.ElapsedMS = ms(time.Since(began))
	if err := out.json(d.res); err != nil {
		return err
	}
	if !d.res.OK {
		return fmt.Errorf("bench drain: %d of %d orders persisted, stock %d", d.res.OrdersInDB, n, d.res.StockDB)
	}
	return nil
}

// drainFlags parses the scenario's flags and checks the configuration.
func drainFlags(args []string, out *output) (cfg app.Config, n, batch int, timeout time.Duration, prof string, err error) {
	fs := flag.NewFlagSet("surge bench drain", flag.ContinueOnError)
	fs.SetOutput(out.errw)
	fs.Usage = func() {
		fmt.Fprint(out.errw, drainHelp, "\nFlags:\n")
		fs.PrintDefaults()
	}
	build := app.ConfigFlags(fs, nil)
	fs.IntVar(&n, "orders", 200_000, "orders to queue and drain (a drain of 50 000 lasts about half a second: one burst of the database's background work decides its rate)")
	fs.IntVar(&batch, "batch", seckill.DefaultBatchSize, "the consumer's batch: entries per read and per transaction (seckill.Options.BatchSize)")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "bound on the whole run")
	fs.StringVar(&prof, "cpuprofile", "", "write a CPU profile of this process while the consumer drains to this file")
	jsonOnly := fs.Bool("json-only", false, "print only the final JSON line")
	if err := fs.Parse(args); err != nil {
		return app.Config{}, 0, 0, 0, "", err
	}
	out.jsonOnly = *jsonOnly
	cfg, err = build()
	switch {
	case err != nil:
		return cfg, 0, 0, 0, "", err
	case cfg.MySQLDSN == "" || len(cfg.RedisAddrs) == 0:
		return cfg, 0, 0, 0, "", errors.New("bench drain: needs real MySQL and Redis (set SURGE_MYSQL_DSN and SURGE_REDIS_ADDRS, or -mysql-dsn and -redis-addrs); it measures MySQL writes, which the embedded SQLite default does not represent")
	case cfg.SeckillStrategy != "lua":
		return cfg, 0, 0, 0, "", errors.New("bench drain: the sync strategy has no order stream")
	case n < 1 || n > 1_000_000:
		return cfg, 0, 0, 0, "", errors.New("bench drain: -orders in [1, 1000000]")
	case batch < 1 || batch > 5000:
		return cfg, 0, 0, 0, "", errors.New("bench drain: -batch in [1, 5000]")
	}
	return cfg, n, batch, timeout, prof, nil
}

// open starts the app (no consumer of its own) and a seckill service without a rate limit.
func (d *drain) open() (closeAll func(), err error) {
	d.cfg.Mode, d.cfg.Seed, d.cfg.SeckillConsumer = "production", false, false
	log := slog.New(slog.NewTextHandler(d.out.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d.log, d.stopGC = log, app.TuneGC(d.cfg, log) // as `surge serve` runs it
	if d.app, err = app.New(d.ctx, d.cfg, app.Options{Logger: log}); err != nil {
		d.stopGC()
		return nil, err
	}
	so := d.app.SeckillOptions()
	so.RateLimit = seckill.RateLimit{PerSecond: -1}
	so.Logger = log
	so.BatchSize = d.batch
	if d.svc, err = seckill.New(d.app.DB.Ent, d.app.Redis, so); err != nil {
		d.app.Close()
		d.stopGC()
		return nil, err
	}
	d.res.Batch = d.batch
	d.out.printf("drain: %d orders, Redis %s, MySQL, batch %d\n", d.n, d.res.Redis, d.res.Batch)
	return func() { d.svc.Close(); d.app.Close(); d.stopGC() }, nil
}

// cleanup deletes what the run created: the voucher's Redis keys and lock, its orders, the
// voucher and the users.
func (d *drain) cleanup() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 2*time.Minute)
	defer cancel()
	db := d.app.DB.SQL
	if d.vid > 0 {
		_ = dropSale(ctx, d.app.Redis, d.cfg, d.vid)
		_, _ = db.ExecContext(ctx, "DELETE FROM tb_voucher_order WHERE voucher_id = ?", d.vid)
		_, _ = db.ExecContext(ctx, "DELETE FROM vouchers WHERE id = ?", d.vid)
	}
	if d.head != "" {
		_, _ = db.ExecContext(ctx, "DELETE FROM users WHERE phone LIKE ?", d.head+"%")
	}
}

// insertUsers inserts n users in bulk (the orders reference them) and reads their ids back.
func (d *drain) insertUsers() error {
	d.head = fmt.Sprintf("1%d%03d", 5+rand.IntN(5), rand.IntN(1000))
	db, now := d.app.DB.SQL, time.Now().UTC()
	for i := 0; i < d.n; i += 1000 {
		var q strings.Builder
		q.WriteString("INSERT INTO users (phone, nickname, icon, role, created_at, updated_at) VALUES ")
		var args []any
		for j := i; j < min(i+1000, d.n); j++ {
			if j > i {
				q.WriteByte(',')
			}
			q.WriteString("(?, ?, '', 'USER', ?, ?)")
			args = append(args, fmt.Sprintf("%s%06d", d.head, j), "bench", now, now)
		}
		if _, err := db.ExecContext(d.ctx, q.String(), args...); err != nil {
			return fmt.Errorf("bench drain: inserting users: %w", err)
		}
	}
	rows, err := db.QueryContext(d.ctx, "SELECT id FROM users WHERE phone LIKE ? ORDER BY id", d.head+"%")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return err
		}
		d.users = append(d.users, id)
	}
	if len(d.users) != d.n {
		return fmt.Errorf("bench drain: %d users inserted, %d read back (phones %s… taken?)", d.n, len(d.users), d.head)
	}
	return rows.Err()
}

// createVoucher creates the SECKILL voucher (stock = orders, on sale beyond the run) and
// warms it.
func (d *drain) createVoucher(timeout time.Duration) error {
	shopID, err := ensureShop(d.ctx, d.app.DB.Ent, d.res.Run)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	v, err := d.app.DB.Ent.Voucher.Create().SetShopID(shopID).SetTitle("bench drain " + d.res.Run).SetPayValue(100).SetActualValue(1000).
		SetKind(voucher.KindSECKILL).SetStock(d.n).SetBeginAt(now.Add(-time.Minute)).SetEndAt(now.Add(timeout + time.Hour)).Save(d.ctx)
	if err != nil {
		return err
	}
	d.vid, d.res.VoucherID = v.ID, v.ID
	return d.svc.Warm(d.ctx, d.vid)
}

// orderRows draws the orders' ids from the same generator the service uses.
func (d *drain) orderRows() error {
	ids, err := idgen.NewSegment(d.app.Redis, "order")
	if err != nil {
		return err
	}
	defer ids.Close()
	d.rows = make([]drainRow, d.n)
	nowMS := time.Now().UnixMilli()
	for i := range d.rows {
		id, err := ids.Next(d.ctx)
		if err != nil {
			return err
		}
		d.rows[i] = drainRow{id: id, user: d.users[i], at: nowMS}
	}
	return nil
}

// measure runs the raw baseline, fills the stream, drains it with the consumer, checks the
// database and runs the raw baseline again. A first raw pass is not measured: each measured
// pass then follows the deletion of the same rows (InnoDB purges them in the background, and
// their pages are reused): the first pass, which followed none, ran 16-85 % faster than the
// last in 8 runs, so the drain, which always follows one, was compared with a mean of unlike
// passes.
func (d *drain) measure() error {
	if _, err := d.raw(); err != nil {
		return err
	}
	var err error
	c0 := d.cpuNow()
	if d.res.RawBeforeRowsPS, err = d.raw(); err != nil {
		return err
	}
	d.res.RawCPU = d.cpuNow().perKRows(c0, d.n)
	d.out.printf("  raw 500-row INSERTs (before): %.0f rows/s\n", d.res.RawBeforeRowsPS)
	if err := d.fill(); err != nil {
		return err
	}
	if err := d.drainStream(); err != nil {
		return err
	}
	if err := d.checkPersisted(); err != nil {
		return err
	}
	if _, err := d.app.DB.SQL.ExecContext(d.ctx, "DELETE FROM tb_voucher_order WHERE voucher_id = ?", d.vid); err != nil {
		return err
	}
	if d.res.RawAfterRowsPS, err = d.raw(); err != nil {
		return err
	}
	d.res.RawRowsPerS = (d.res.RawBeforeRowsPS + d.res.RawAfterRowsPS) / 2
	d.res.Ratio = round3(d.res.OursRowsPerS / d.res.RawRowsPerS)
	d.out.printf("  raw 500-row INSERTs (after): %.0f rows/s; mean %.0f\n", d.res.RawAfterRowsPS, d.res.RawRowsPerS)
	d.out.printf("  ours / raw: %.3f×\n", d.res.Ratio)
	if !d.res.OK {
		d.out.printf("  PROBLEM: %d of %d orders in MySQL, stock %d (want 0)\n", d.res.OrdersInDB, d.n, d.res.StockDB)
	}
	return nil
}

// raw measures the raw baseline and deletes its rows. The baseline is the database's pace, so
// its client runs with Go's default collector, not the server's heap floor: cycling through a
// 128 MiB heap instead of a few MiB that stay in the CPU's caches made its INSERTs 25-30 %
// slower (the client's CPU per 1 000 rows 2.2-2.4 ms against 5.8-6.2), below that pace.
func (d *drain) raw() (float64, error) {
	d.stopGC()
	runtime.GC()
	r, err := rawInsert(d.ctx, d.app, d.vid, d.rows)
	d.stopGC = app.TuneGC(d.cfg, d.log)
	if err != nil {
		return 0, fmt.Errorf("bench drain: raw inserts: %w", err)
	}
	if _, err := d.app.DB.SQL.ExecContext(d.ctx, "DELETE FROM tb_voucher_order WHERE voucher_id = ?", d.vid); err != nil {
		return 0, err
	}
	return r, nil
}

// fillPipeline is how many grabs one pipeline of the fill carries.
const fillPipeline = 1000

// fill admits every row through the admission script (pipelined EVALSHA), so the stream
// holds n orders.
func (d *drain) fill() error {
	k := lua.SeckillKeys(seckill.KeysOf(d.cfg.SeckillKeyPrefix(), d.vid))
	if _, err := lua.LoadGrab(d.ctx, d.app.Redis); err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < len(d.rows); i += fillPipeline {
		var calls []*lua.QueuedGrab
		_, err := d.app.Redis.Pipelined(d.ctx, func(p redis.Pipeliner) error {
			for _, r := range d.rows[i:min(i+fillPipeline, len(d.rows))] {
				calls = append(calls, lua.QueueGrab(d.ctx, p, k, time.UnixMilli(r.at), []lua.GrabRequest{{User: r.user, Order: r.id}}))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("bench drain: admitting: %w", err)
		}
		for _, c := range calls {
			r, err := c.Replies(d.ctx, d.app.Redis)
			if err != nil || r[0].Outcome != lua.GrabAdmitted {
				return fmt.Errorf("bench drain: the admission script answered %v, %v", r, err)
			}
		}
	}
	d.res.FillMS = ms(time.Since(start))
	if l, err := d.app.Redis.XLen(d.ctx, k.Orders).Result(); err != nil || l != int64(d.n) {
		return fmt.Errorf("bench drain: the stream holds %d orders, want %d (%v)", l, d.n, err)
	}
	d.out.printf("  %d orders queued in %.0f ms\n", d.n, d.res.FillMS)
	return nil
}

// drainStream runs the consumer and polls the stream's length until it is empty: rows/s from
// the first batch persisted to the last, and from the consumer's start.
func (d *drain) drainStream() error {
	stream := seckill.KeysOf(d.cfg.SeckillKeyPrefix(), d.vid).Orders
	cctx, stop := context.WithCancel(d.ctx)
	done := make(chan struct{})
	defer func() { stop(); <-done }()
	cmds := &nameCounter{}
	d.app.Redis.AddHook(cmds)
	if sc := d.app.StreamClient(); sc != nil && sc != d.app.Redis {
		sc.AddHook(cmds)
	}
	if d.prof != "" {
		stopProfile, err := startCPUProfile(d.prof)
		if err != nil {
			return err
		}
		defer stopProfile()
		d.res.CPUProfile = d.prof
	}
	cmds.take()
	c0 := d.cpuNow()
	t0 := time.Now()
	go func() { defer close(done); _ = d.svc.RunConsumer(cctx) }()
	var tFirst, tLast time.Time
	lenAtFirst := int64(d.n)
	for tLast.IsZero() {
		l, err := d.app.Redis.XLen(d.ctx, stream).Result()
		if err != nil {
			return fmt.Errorf("bench drain: polling the stream: %w", err)
		}
		t := time.Now()
		if tFirst.IsZero() && l < int64(d.n) {
			tFirst, lenAtFirst = t, l
		}
		switch {
		case l == 0:
			tLast = t
		case d.ctx.Err() != nil:
			return fmt.Errorf("bench drain: %d orders still queued: %w", l, d.ctx.Err())
		default:
			time.Sleep(2 * time.Millisecond)
		}
	}
	d.res.OursCPU = d.cpuNow().perKRows(c0, d.n)
	batches := float64(d.n) / float64(d.res.Batch)
	d.res.CommandsPerBatch = map[string]float64{}
	for name, k := range cmds.take() {
		if name != "xlen" { // the polling below, on the same client
			d.res.CommandsPerBatch[name] = round3(float64(k) / batches)
		}
	}
	d.res.DrainMS = ms(tLast.Sub(t0))
	d.res.FirstToLastMS = ms(tLast.Sub(tFirst))
	d.res.RowsFirstToLast = int(lenAtFirst)
	d.res.OursFromStartRPS = float64(d.n) / tLast.Sub(t0).Seconds()
	if span := tLast.Sub(tFirst); span > 0 && lenAtFirst > 0 {
		d.res.OursRowsPerS = float64(lenAtFirst) / span.Seconds()
	} else {
		d.res.OursRowsPerS = d.res.OursFromStartRPS // one batch: nothing between first and last
	}
	return nil
}

// checkPersisted counts the orders in MySQL and reads the stock: every order CREATED, stock 0.
func (d *drain) checkPersisted() error {
	db := d.app.DB.SQL
	if err := db.QueryRowContext(d.ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ? AND status = 'CREATED'", d.vid).Scan(&d.res.OrdersInDB); err != nil {
		return err
	}
	if err := db.QueryRowContext(d.ctx, "SELECT stock FROM vouchers WHERE id = ?", d.vid).Scan(&d.res.StockDB); err != nil {
		return err
	}
	d.res.OK = d.res.OrdersInDB == d.n && d.res.StockDB == 0
	d.out.printf("  consumer drained %d orders in %.0f ms: %.0f rows/s first to last persisted (%.0f from its start)\n",
		d.n, d.res.DrainMS, d.res.OursRowsPerS, d.res.OursFromStartRPS)
	names := slices.Sorted(maps.Keys(d.res.CommandsPerBatch))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, d.res.CommandsPerBatch[n])
	}
	d.out.printf("  Redis commands per batch of %d: %s\n", d.res.Batch, strings.Join(parts, ", "))
	if r, o := d.res.RawCPU, d.res.OursCPU; r != nil && o != nil {
		d.out.printf("  CPU ms per 1 000 rows, raw INSERTs / ours: MySQL %.1f / %.1f, Redis %.1f / %.1f, this process %.1f / %.1f\n",
			r.MySQL, o.MySQL, r.Redis, o.Redis, r.Bench, o.Bench)
	}
	return nil
}

// rawInsert writes the rows with 500-row multi-value INSERTs on one connection (autocommit)
// and returns rows/s.
func rawInsert(ctx context.Context, a *app.App, vid int, rows []drainRow) (float64, error) {
	conn, err := a.DB.SQL.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	now := time.Now().UTC()
	start := time.Now()
	for i := 0; i < len(rows); i += 500 {
		var q strings.Builder
		q.WriteString("INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES ")
		chunk := rows[i:min(i+500, len(rows))]
		args := make([]any, 0, 5*len(chunk))
		for j, r := range chunk {
			if j > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?, ?, ?, ?, ?, 'CREATED', 1)")
			args = append(args, r.id, time.UnixMilli(r.at).UTC(), now, r.user, vid)
		}
		if _, err := conn.ExecContext(ctx, q.String(), args...); err != nil {
			return 0, err
		}
	}
	return float64(len(rows)) / time.Since(start).Seconds(), nil
}
