package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
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

  SURGE_REDIS_ADDRS=127.0.0.1:6379 SURGE_MYSQL_DSN='user:pass@tcp(127.0.0.1:3306)/surge' surge bench drain [-orders N]

It inserts -orders users in bulk (the orders reference them), creates a SECKILL voucher (stock
= orders), admits every user once through the real admission script (pipelined EVALSHA of
lua/seckill_grab.lua), so the voucher's stream holds N orders, then starts Service.RunConsumer
(default batch 500) and polls XLEN until the stream is empty: rows/s from the first batch
persisted to the last (and from the consumer's start). The raw baseline writes the same rows
into tb_voucher_order with plain INSERT ... VALUES (...),(...) statements of 500 rows on one
connection (autocommit), before and after the drain (deleting them after each), and the ratio
is ours / the mean raw rate. Needs real MySQL and Redis (the embedded default is refused).
Everything the run creates (users, voucher, orders, Redis keys) is deleted at the end.
`

// DrainResult is the final JSON line of the drain scenario.
type DrainResult struct {
	Scenario  string `json:"scenario"`
	Redis     string `json:"redis"`
	Run       string `json:"run"`
	Prefix    string `json:"seckill_prefix"`
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
	OrdersInDB       int     `json:"orders_in_db"`
	StockDB          int     `json:"stock_db"`
	OK               bool    `json:"ok"`
	ElapsedMS        float64 `json:"elapsed_ms"`
}

type drainRow struct {
	id   int64
	user int
	at   int64 // Unix ms
}

func runDrain(ctx context.Context, args []string, out *output) error {
	fs := flag.NewFlagSet("surge bench drain", flag.ContinueOnError)
	fs.SetOutput(out.errw)
	fs.Usage = func() {
		fmt.Fprint(out.errw, drainHelp, "\nFlags:\n")
		fs.PrintDefaults()
	}
	build := app.ConfigFlags(fs, nil)
	n := fs.Int("orders", 50_000, "orders to queue and drain")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole run")
	jsonOnly := fs.Bool("json-only", false, "print only the final JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out.jsonOnly = *jsonOnly
	cfg, err := build()
	if err != nil {
		return err
	}
	if cfg.MySQLDSN == "" || len(cfg.RedisAddrs) == 0 {
		return errors.New("bench drain: needs real MySQL and Redis (set SURGE_MYSQL_DSN and SURGE_REDIS_ADDRS, or -mysql-dsn and -redis-addrs); it measures MySQL writes, which the embedded SQLite default does not represent")
	}
	if cfg.SeckillStrategy != "lua" {
		return errors.New("bench drain: the sync strategy has no order stream")
	}
	if *n < 1 || *n > 1_000_000 {
		return errors.New("bench drain: -orders in [1, 1000000]")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	began := time.Now()
	run := runID()
	res := DrainResult{Scenario: "drain", Redis: strings.Join(cfg.RedisAddrs, ","), Run: run, Prefix: cfg.SeckillPrefix, Orders: *n}

	cfg.Mode, cfg.Seed, cfg.SeckillConsumer = "production", false, false
	log := slog.New(slog.NewTextHandler(out.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, cfg, app.Options{Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()
	so := a.SeckillOptions()
	so.RateLimit = seckill.RateLimit{PerSecond: -1}
	so.Logger = log
	svc, err := seckill.New(a.DB.Ent, a.Redis, so)
	if err != nil {
		return err
	}
	defer svc.Close()
	res.Batch = 500 // seckill.Options' default BatchSize
	out.printf("drain: %d orders, Redis %s, MySQL, batch %d\n", *n, res.Redis, res.Batch)

	// Users, in bulk.
	head := fmt.Sprintf("1%d%03d", 5+rand.IntN(5), rand.IntN(1000))
	db := a.DB.SQL
	cleanup := func(vid int) {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer ccancel()
		if vid > 0 {
			k := seckill.KeysOf(cfg.SeckillPrefix, vid)
			lk := "lock:{" + cfg.SeckillPrefix + ":" + strconv.Itoa(vid) + "}"
			_ = unlink(cctx, a.Redis, k.Meta, k.Stock, k.Buyers, k.Orders, k.Dead, lk, lk+":fence")
			a.Redis.ZRem(cctx, cfg.SeckillPrefix+":vouchers", strconv.Itoa(vid))
			_, _ = db.ExecContext(cctx, "DELETE FROM tb_voucher_order WHERE voucher_id = ?", vid)
			_, _ = db.ExecContext(cctx, "DELETE FROM vouchers WHERE id = ?", vid)
		}
		_, _ = db.ExecContext(cctx, "DELETE FROM users WHERE phone LIKE ?", head+"%")
	}
	vid := 0
	defer func() { cleanup(vid) }()
	now := time.Now().UTC()
	for i := 0; i < *n; i += 1000 {
		var q strings.Builder
		q.WriteString("INSERT INTO users (phone, nickname, icon, role, created_at, updated_at) VALUES ")
		var args []any
		for j := i; j < min(i+1000, *n); j++ {
			if j > i {
				q.WriteByte(',')
			}
			q.WriteString("(?, ?, '', 'USER', ?, ?)")
			args = append(args, fmt.Sprintf("%s%06d", head, j), "bench", now, now)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("bench drain: inserting users: %w", err)
		}
	}
	users := make([]int, 0, *n)
	rows, err := db.QueryContext(ctx, "SELECT id FROM users WHERE phone LIKE ? ORDER BY id", head+"%")
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		users = append(users, id)
	}
	rows.Close()
	if len(users) != *n {
		return fmt.Errorf("bench drain: %d users inserted, %d read back (phones %s… taken?)", *n, len(users), head)
	}

	// The voucher, warmed.
	shopID, err := ensureShop(ctx, a.DB.Ent, run)
	if err != nil {
		return err
	}
	stock := *n
	begin, end := now.Add(-time.Minute), now.Add(*timeout+time.Hour)
	v, err := a.DB.Ent.Voucher.Create().SetShopID(shopID).SetTitle("bench drain " + run).SetPayValue(100).SetActualValue(1000).
		SetKind(voucher.KindSECKILL).SetStock(stock).SetBeginAt(begin).SetEndAt(end).Save(ctx)
	if err != nil {
		return err
	}
	vid = v.ID
	res.VoucherID = vid
	if err := svc.Warm(ctx, vid); err != nil {
		return err
	}

	// The rows: order ids from the same generator the service uses.
	ids, err := idgen.NewSegment(a.Redis, "order")
	if err != nil {
		return err
	}
	defer ids.Close()
	drows := make([]drainRow, *n)
	nowMS := time.Now().UnixMilli()
	for i := range drows {
		id, err := ids.Next(ctx)
		if err != nil {
			return err
		}
		drows[i] = drainRow{id: id, user: users[i], at: nowMS}
	}

	raw := func() (float64, error) {
		r, err := rawInsert(ctx, a, vid, drows)
		if err != nil {
			return 0, fmt.Errorf("bench drain: raw inserts: %w", err)
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM tb_voucher_order WHERE voucher_id = ?", vid); err != nil {
			return 0, err
		}
		return r, nil
	}
	if res.RawBeforeRowsPS, err = raw(); err != nil {
		return err
	}
	out.printf("  raw 500-row INSERTs (before): %.0f rows/s\n", res.RawBeforeRowsPS)

	// Fill the stream through the admission script.
	k := seckill.KeysOf(cfg.SeckillPrefix, vid)
	if _, err := lua.LoadGrab(ctx, a.Redis); err != nil {
		return err
	}
	fillStart := time.Now()
	for i := 0; i < len(drows); i += 1000 {
		var calls []*lua.QueuedGrab
		_, err := a.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, r := range drows[i:min(i+1000, len(drows))] {
				calls = append(calls, lua.QueueGrab(ctx, p, lua.SeckillKeys(k), time.UnixMilli(r.at), []lua.GrabRequest{{User: r.user, Order: r.id}}))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("bench drain: admitting: %w", err)
		}
		for _, c := range calls {
			r, err := c.Replies(ctx, a.Redis)
			if err != nil || r[0].Outcome != lua.GrabAdmitted {
				return fmt.Errorf("bench drain: the admission script answered %v, %v", r, err)
			}
		}
	}
	res.FillMS = ms(time.Since(fillStart))
	if l, err := a.Redis.XLen(ctx, k.Orders).Result(); err != nil || l != int64(*n) {
		return fmt.Errorf("bench drain: the stream holds %d orders, want %d (%v)", l, *n, err)
	}
	out.printf("  %d orders queued in %.0f ms\n", *n, res.FillMS)

	// Drain.
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	t0 := time.Now()
	go func() { defer close(done); _ = svc.RunConsumer(cctx) }()
	var tFirst, tLast time.Time
	lenAtFirst := int64(*n)
	for {
		l, err := a.Redis.XLen(ctx, k.Orders).Result()
		if err != nil {
			stop()
			<-done
			return fmt.Errorf("bench drain: polling the stream: %w", err)
		}
		t := time.Now()
		if tFirst.IsZero() && l < int64(*n) {
			tFirst, lenAtFirst = t, l
		}
		if l == 0 {
			tLast = t
			break
		}
		if ctx.Err() != nil {
			stop()
			<-done
			return fmt.Errorf("bench drain: %d orders still queued: %w", l, ctx.Err())
		}
		time.Sleep(2 * time.Millisecond)
	}
	stop()
	<-done
	res.DrainMS = ms(tLast.Sub(t0))
	res.FirstToLastMS = ms(tLast.Sub(tFirst))
	res.RowsFirstToLast = int(lenAtFirst)
	res.OursFromStartRPS = float64(*n) / tLast.Sub(t0).Seconds()
	if d := tLast.Sub(tFirst); d > 0 && lenAtFirst > 0 {
		res.OursRowsPerS = float64(lenAtFirst) / d.Seconds()
	} else {
		res.OursRowsPerS = res.OursFromStartRPS // one batch: nothing between first and last
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ? AND status = 'CREATED'", vid).Scan(&res.OrdersInDB); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, "SELECT stock FROM vouchers WHERE id = ?", vid).Scan(&res.StockDB); err != nil {
		return err
	}
	res.OK = res.OrdersInDB == *n && res.StockDB == 0
	out.printf("  consumer drained %d orders in %.0f ms: %.0f rows/s first to last persisted (%.0f from its start)\n",
		*n, res.DrainMS, res.OursRowsPerS, res.OursFromStartRPS)

	if _, err := db.ExecContext(ctx, "DELETE FROM tb_voucher_order WHERE voucher_id = ?", vid); err != nil {
		return err
	}
	if res.RawAfterRowsPS, err = raw(); err != nil {
		return err
	}
	res.RawRowsPerS = (res.RawBeforeRowsPS + res.RawAfterRowsPS) / 2
	res.Ratio = round3(res.OursRowsPerS / res.RawRowsPerS)
	out.printf("  raw 500-row INSERTs (after): %.0f rows/s; mean %.0f\n", res.RawAfterRowsPS, res.RawRowsPerS)
	out.printf("  ours / raw: %.3f×\n", res.Ratio)
	if !res.OK {
		out.printf("  PROBLEM: %d of %d orders in MySQL, stock %d (want 0)\n", res.OrdersInDB, *n, res.StockDB)
	}
	res.ElapsedMS = ms(time.Since(began))
	if err := out.json(res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("bench drain: %d of %d orders persisted, stock %d", res.OrdersInDB, *n, res.StockDB)
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
