package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/commalist"
	"github.com/surgekit/surge/seckill"
)

// Exit codes of surge reconcile.
const (
	exitOK       = 0 // every voucher OK or fixed
	exitProblems = 1 // problems left
	exitUsage    = 2 // bad usage, or Redis/MySQL unreachable or failing
)

const reconcileHelp = `usage: surge reconcile [-fix] [-voucher id,...] [-json] [configuration flags]

Compares each seckill voucher's sale state in Redis with MySQL, under the voucher's lock (the
order consumer commits nothing meanwhile; grabs go on): Redis stock against the database stock
minus the orders queued in the stream, the buyers hash against the live orders plus the
stream's users, the sale window and on/off, the consumer's registry; in the database alone,
negative stock and users holding two live orders; a state older than the running Redis process
(stale: rebuilt before a restart or failover). It lists the orders re-homed under a fresh id or
superseded after Redis lost state (their users find them under the id they were told). -fix
rebuilds a voucher that disagrees from the database and the stream (as Service.Rebuild) and
checks it again; database problems are reported, never fixed. It starts neither the server
nor the consumer.

Vouchers: -voucher, or every seckill voucher whose sale is on, to come, or ended less than
-ended-within ago, plus every voucher registered in Redis.

Redis and MySQL come from the same variables and flags as "surge serve" (SURGE_REDIS_ADDRS,
SURGE_MYSQL_DSN, SURGE_NAMESPACE, ...); both must be real services.
Exit status: 0 every voucher OK (or fixed), 1 problems left, 2 usage or connection error.

flags:`

// reconcileFlags are the flags the help lists; the other flags of serve are accepted and
// have no effect here.
var reconcileFlags = []string{"fix", "voucher", "json", "ended-within", "timeout",
	"redis-addrs", "redis-password", "mysql-dsn", "namespace", "seckill-strategy"}

// reconcile runs "surge reconcile" and returns its exit code.
func reconcile(args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	build := app.ConfigFlags(fs, nil)
	fix := fs.Bool("fix", false, "rebuild the vouchers whose Redis state disagrees with the database, then check them again")
	vouchers := fs.String("voucher", "", "comma-separated voucher ids to check (default: see above)")
	jsonOut := fs.Bool("json", false, "print one JSON document instead of the table")
	within := fs.Duration("ended-within", 24*time.Hour, "without -voucher: also check vouchers whose sale ended less than this ago")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (exit 2)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, reconcileHelp)
		for _, name := range reconcileFlags {
			f := fs.Lookup(name)
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(stderr, "  -%s\n    \t%s%s\n", f.Name, f.Usage, def)
		}
		fmt.Fprintln(stderr, `  (the other flags of "surge serve -h" are accepted and ignored)`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "surge reconcile: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q (vouchers go in -voucher id,id)", fs.Arg(0))
	}
	ids, err := parseIDs(*vouchers)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := build()
	if err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	a, err := app.Connect(ctx, cfg, app.Options{Logger: log})
	if err != nil {
		return fail("%v", err)
	}
	defer a.Close()
	svc, err := seckill.New(a.DB.Ent, a.Redis, a.SeckillOptions())
	if err != nil {
		return fail("%v", err)
	}
	defer svc.Close()
	reports, err := svc.Reconcile(ctx, seckill.ReconcileOptions{VoucherIDs: ids, Fix: *fix, EndedWithin: *within})
	if err != nil {
		return fail("%v", err)
	}

	sum := summary{}
	for _, r := range reports {
		switch r.Result {
		case seckill.ReconcileOK:
			sum.OK++
		case seckill.ReconcileFixed:
			sum.Fixed++
		default:
			sum.Problem++
		}
	}
	if *jsonOut {
		doc := struct {
			OK        bool                    `json:"ok"`
			Strategy  string                  `json:"strategy"`
			Namespace string                  `json:"namespace"`
			Fix       bool                    `json:"fix"`
			Summary   summary                 `json:"summary"`
			Vouchers  []seckill.VoucherReport `json:"vouchers"`
		}{sum.Problem == 0, cfg.SeckillStrategy, cfg.Namespace, *fix, sum, reports}
		if doc.Vouchers == nil {
			doc.Vouchers = []seckill.VoucherReport{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return fail("%v", err)
		}
	} else {
		printReports(stdout, cfg, reports, sum)
	}
	if sum.Problem > 0 {
		return exitProblems
	}
	return exitOK
}

type summary struct {
	OK      int `json:"ok"`
	Fixed   int `json:"fixed"`
	Problem int `json:"problem"`
}

func parseIDs(s string) ([]int, error) {
	var ids []int
	for _, f := range commalist.Split(s) {
		id, err := strconv.Atoi(f)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("-voucher: %q is not a voucher id", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// printReports prints one table row per voucher, then the problems, fixes and notes.
func printReports(w io.Writer, cfg app.Config, reports []seckill.VoucherReport, sum summary) {
	if len(reports) == 0 {
		fmt.Fprintln(w, "no seckill vouchers to reconcile")
		return
	}
	if cfg.SeckillStrategy == string(seckill.StrategySync) {
		fmt.Fprintln(w, "strategy sync: Redis holds no sale state; database figures only")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VOUCHER\tREADY\tDB STOCK\tREDIS STOCK\tEXPECTED\tBUYERS/EXPECTED\tDB ORDERS\tQUEUED\tPENDING\tDEAD\tSTATUS")
	dash := func(ok bool, s string) string {
		if !ok {
			return "-"
		}
		return s
	}
	for _, r := range reports {
		ready, redisStock := "no", "missing"
		if r.Ready {
			ready = "yes"
		}
		if r.RedisStock != nil {
			redisStock = strconv.FormatInt(*r.RedisStock, 10)
		}
		rc := r.RedisChecked
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.VoucherID, dash(rc, ready), r.DBStock,
			dash(rc, redisStock), dash(rc, strconv.FormatInt(r.ExpectedStock, 10)),
			dash(rc, fmt.Sprintf("%d/%d", r.Buyers, r.ExpectedBuyers)), r.DBOrders,
			dash(rc, strconv.FormatInt(r.Queued, 10)), dash(rc, strconv.FormatInt(r.Pending, 10)),
			dash(rc, strconv.FormatInt(r.DeadLetters, 10)), r.Result)
	}
	tw.Flush()
	for _, r := range reports {
		if len(r.Problems)+len(r.Found)+len(r.Notes) == 0 && r.FixError == "" {
			continue
		}
		fmt.Fprintf(w, "\nvoucher %d: %s\n", r.VoucherID, r.Result)
		for _, p := range r.Found {
			fmt.Fprintf(w, "  found:   %s\n", p)
		}
		if r.FixError != "" {
			fmt.Fprintf(w, "  fix failed: %s\n", r.FixError)
		}
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note:    %s\n", n)
		}
	}
	noun := "vouchers"
	if len(reports) == 1 {
		noun = "voucher"
	}
	fmt.Fprintf(w, "\n%d %s: %d OK, %d fixed, %d with problems\n", len(reports), noun, sum.OK, sum.Fixed, sum.Problem)
}
