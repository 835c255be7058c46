package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/commalist"
)

const seckillHelp = `surge bench seckill: a load test of the flash-sale flow, with its invariants checked after.

  surge bench seckill -inprocess [-users N] [-attempts A] [-concurrency C] [-stock S] [config flags]
  surge bench seckill -target http://host:8080[,http://host2:8080] [flags] [config flags]

Every simulated user (distinct random phones of this run) logs in through the real login path
first (sendLoginCode's dev code, then login; concurrently, with progress), an admin creates a
SECKILL voucher (stock -stock, window open now), then -users × -attempts grabs are fired from
-concurrency workers (all first attempts, in random order, before any second one).

-inprocess builds the app in this process (app.New: real Redis and MySQL from the config flags,
or with none given the embedded default, miniredis + SQLite in a temporary directory) in dev
mode and with no per-user rate limit (unless -rate), and calls the service API: auth login,
Catalog.CreateVoucher + Seckill.Warm, Seckill.Grab; its stream consumer persists the orders,
during the grabs or, with -consume-after, once they are done (admission alone: the stream
absorbs the surge, as when the consumers run elsewhere or fall behind).
-target sends GraphQL over HTTP (sendLoginCode/login, createVoucher as -admin-phone or
-admin-token, seckillVoucher) round-robin over the URLs; the servers must run in dev mode
(SURGE_MODE=dev) so sendLoginCode returns the code. To verify, the tool reads Redis and MySQL
itself: give it the servers' SURGE_REDIS_ADDRS, SURGE_MYSQL_DSN and SURGE_NAMESPACE (or
the flags); -no-verify skips that.

After the grabs it waits for the order stream to drain (-drain-timeout), then checks: orders in
MySQL = admitted answers (= min(stock, users) when every user got an answer), no user with two
live orders, every admitted order in MySQL for its user, MySQL stock + orders = initial, Redis
stock + buyers = initial (lua strategy), no admission answered twice. A violation makes the
command exit non-zero with the list. When redis-benchmark is on PATH (and Redis is real), it
measures redis-benchmark -c 50 running the same admission script on a throwaway voucher of
this run's prefix right before and right after, and prints our rate as a ratio of it.

-sales N runs N such sales one after another with the same users (a new voucher each, measured,
drained and checked) and prints each sale's figures and the median ratio: a grab phase of a
second or so moves by ±15 % from one sale to the next on a shared machine.

The last stdout line is one JSON object with the figures; -report writes an HTML page.
`

// Outcomes of one grab call.
const (
	oAdmitted = iota
	oSoldOut
	oAlready
	oRateLimited
	oNotReady
	oError
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"admitted", "sold_out", "already_purchased", "rate_limited", "not_ready", "errors"}

// Outcomes counts grab answers by kind.
type Outcomes struct {
	Admitted         int64 `json:"admitted"`
	SoldOut          int64 `json:"sold_out"`
	AlreadyPurchased int64 `json:"already_purchased"`
	RateLimited      int64 `json:"rate_limited"`
	NotReady         int64 `json:"not_ready"`
	Errors           int64 `json:"errors"`
}

func (o Outcomes) list() [nOutcomes]int64 {
	return [nOutcomes]int64{o.Admitted, o.SoldOut, o.AlreadyPurchased, o.RateLimited, o.NotReady, o.Errors}
}

// LatencyMS is a latency summary in milliseconds.
type LatencyMS struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Baseline is redis-benchmark running the admission script, measured in the same run.
type Baseline struct {
	Command   string  `json:"command,omitempty"`
	Before    float64 `json:"rps_before,omitempty"`
	After     float64 `json:"rps_after,omitempty"`
	RPS       float64 `json:"rps,omitempty"` // mean of before and after (those measured)
	P50Before float64 `json:"p50_ms_before,omitempty"`
	Admitted  int64   `json:"admitted_by_script,omitempty"` // sanity: the script really admitted
	Note      string  `json:"note,omitempty"`
}

// SeckillResult is the final JSON line of the seckill scenario.
type SeckillResult struct {
	Scenario    string   `json:"scenario"`
	Mode        string   `json:"mode"` // inprocess or http
	Targets     []string `json:"targets,omitempty"`
	Redis       string   `json:"redis"`
	Database    string   `json:"database"`
	Strategy    string   `json:"strategy"`
	Consumer    string   `json:"consumer"` // during (the grabs), after (-consume-after) or servers
	Namespace   string   `json:"namespace"`
	Run         string   `json:"run"`
	Users       int      `json:"users"`
	Attempts    int      `json:"attempts"`
	Concurrency int      `json:"concurrency"`
	Stock       int      `json:"stock"`
	VoucherID   int      `json:"voucher_id"`
	PhonePrefix string   `json:"phone_prefix"` // the simulated users' phones start with it

	LoginMS       float64      `json:"login_ms"`
	LoginsPerS    float64      `json:"logins_per_s"`
	Grabs         int64        `json:"grabs"` // calls made (not-ready retries included)
	GrabMS        float64      `json:"grab_ms"`
	ThroughputRPS float64      `json:"throughput_rps"`
	LatencyJSON   LatencyMS    `json:"latency_ms"`
	Outcomes      Outcomes     `json:"outcomes"`
	FirstError    string       `json:"first_error,omitempty"`
	Capped        bool         `json:"capped_by_duration,omitempty"`
	SeriesStepMS  int          `json:"series_step_ms"`
	Series        []int64      `json:"series"` // grabs completed per step
	Baseline      Baseline     `json:"baseline"`
	Ratio         float64      `json:"ratio_vs_redis_benchmark,omitempty"`
	Verification  Verification `json:"verification"`
	BucketRuns    []BucketRun  `json:"bucket_runs,omitempty"` // -buckets with a list: one sale per count
	Sales         []SaleRun    `json:"sales,omitempty"`       // -sales N > 1: every sale (the fields above are the last one's)
	RatioMedian   float64      `json:"ratio_median,omitempty"`
	OK            bool         `json:"ok"`
	Report        string       `json:"report,omitempty"`
	CPUProfile    string       `json:"cpu_profile,omitempty"`
	ElapsedMS     float64      `json:"elapsed_ms"`
}

type seckillOpts struct {
	users, attempts, concurrency, stock, loginConc int
	duration, timeout, drainTimeout                time.Duration
	report, cpuprofile                             string
	noBaseline, noVerify, inprocess, keep          bool
	consumeAfter                                   bool
	baselineN                                      int
	targets                                        []string
	adminPhone, adminToken                         string
	rate                                           float64
	buckets                                        []int // stock buckets of each sale (-buckets)
	sales                                          int   // sales run one after another with the same users
}

// listFlag is a repeatable, comma-separated string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, commalist.Split(v)...)
	return nil
}

func runSeckill(ctx context.Context, args []string, out *output) error {
	fs := flag.NewFlagSet("surge bench seckill", flag.ContinueOnError)
	fs.SetOutput(out.errw)
	fs.Usage = func() {
		fmt.Fprint(out.errw, seckillHelp, "\nFlags:\n")
		fs.PrintDefaults()
	}
	build := app.ConfigFlags(fs, nil)
	var o seckillOpts
	var targets listFlag
	fs.IntVar(&o.users, "users", 1000, "simulated users (distinct phones, each logged in)")
	fs.IntVar(&o.attempts, "attempts", 1, "grabs per user")
	fs.IntVar(&o.concurrency, "concurrency", 200, "grabs in flight at once (workers)")
	fs.IntVar(&o.stock, "stock", -1, "units on sale; -1 = users (stock ≥ demand); smaller for a sell-out")
	fs.IntVar(&o.loginConc, "login-concurrency", 64, "logins in flight at once")
	fs.DurationVar(&o.duration, "duration", 0, "cap on the grab phase (0: until every attempt is made)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on the whole run")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 2*time.Minute, "bound on waiting for the order stream to drain before verifying")
	fs.StringVar(&o.report, "report", "", "write a self-contained HTML report to this file")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the grab phase (this process) to this file")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "do not run redis-benchmark")
	fs.IntVar(&o.baselineN, "baseline-n", 150_000, "requests of each redis-benchmark run (~3 s at 50k/s)")
	fs.BoolVar(&o.noVerify, "no-verify", false, "HTTP mode: skip the checks in Redis and MySQL (no access to them)")
	fs.BoolVar(&o.inprocess, "inprocess", false, "run the service in this process instead of targeting servers")
	fs.BoolVar(&o.consumeAfter, "consume-after", false, "-inprocess: start the order consumer after the grabs, not during them (admission alone, as when the consumers run elsewhere or lag behind the surge)")
	fs.Var(&targets, "target", "server URL(s), comma-separated or repeated: grabs are spread round-robin")
	fs.StringVar(&o.adminPhone, "admin-phone", app.DevAdminPhone, "HTTP mode: phone of an admin (SURGE_ADMIN_PHONES of the servers) to create the voucher")
	fs.StringVar(&o.adminToken, "admin-token", "", "HTTP mode: an admin's session token instead of logging in as -admin-phone (a phone waits 60 s between codes, longer after three)")
	fs.Float64Var(&o.rate, "rate", -1, "in-process: grabs per second per user (burst twice that); negative: no limit")
	bucketList := fs.String("buckets", "1", "-inprocess: stock buckets of the voucher (1-64); a list (1,3,6) runs one sale per value with the same users and reports each, with the share of script calls and the CPU of each Redis master")
	fs.IntVar(&o.sales, "sales", 1, "sales run one after another with the same users (1-20), each measured and checked; the JSON adds each sale's figures and the median ratio")
	jsonOnly := fs.Bool("json-only", false, "print only the final JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench seckill: unexpected argument %q", fs.Arg(0))
	}
	out.jsonOnly = *jsonOnly
	o.targets = targets
	if o.inprocess {
		// Dev mode before the config is built, so that its defaults hold (no login send
		// limits: the simulated users log in by the thousand); limits given explicitly apply.
		_ = fs.Set("mode", "dev")
	}
	cfg, err := build()
	if err != nil {
		return err
	}
	if o.stock < 0 {
		o.stock = o.users
	}
	if o.buckets, err = parseBuckets(*bucketList); err != nil {
		return err
	}
	switch {
	case (len(o.buckets) > 1 || o.buckets[0] != 1) && !o.inprocess:
		return errors.New("bench seckill: -buckets needs -inprocess")
	case o.inprocess == (len(o.targets) > 0):
		return errors.New("bench seckill: give either -inprocess or -target URL[,URL...]")
	case o.users < 1 || o.users > 1_000_000:
		return errors.New("bench seckill: -users in [1, 1000000]")
	case o.attempts < 1 || o.attempts > 100 || o.users*o.attempts > 20_000_000:
		return errors.New("bench seckill: -attempts in [1, 100], users × attempts ≤ 20M")
	case o.concurrency < 1 || o.concurrency > 10_000 || o.loginConc < 1 || o.loginConc > 10_000:
		return errors.New("bench seckill: -concurrency and -login-concurrency in [1, 10000]")
	case o.timeout <= 0 || o.drainTimeout <= 0 || o.duration < 0:
		return errors.New("bench seckill: -timeout and -drain-timeout must be positive, -duration not negative")
	case o.sales < 1 || o.sales > 20:
		return errors.New("bench seckill: -sales in [1, 20]")
	case o.sales > 1 && (len(o.buckets) > 1 || o.buckets[0] != 1):
		return errors.New("bench seckill: -sales and -buckets both run several sales: give one of them")
	case o.consumeAfter && !o.inprocess:
		return errors.New("bench seckill: -consume-after needs -inprocess (the servers run their own consumers)")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	began := time.Now()
	run := runID()
	res := &SeckillResult{Scenario: "seckill", Run: run, Users: o.users, Attempts: o.attempts, Concurrency: o.concurrency,
		Stock: o.stock, Strategy: cfg.SeckillStrategy, Namespace: cfg.Namespace, SeriesStepMS: 100}

	var tg seckillTarget
	if o.inprocess {
		res.Mode, res.Consumer = "inprocess", "during"
		if o.consumeAfter {
			res.Consumer = "after"
		}
		tg, err = newInprocess(ctx, cfg, o, out)
	} else {
		res.Mode, res.Consumer = "http", "servers"
		res.Targets = o.targets
		tg, err = newHTTPTarget(ctx, cfg, o)
	}
	if err != nil {
		return err
	}
	defer tg.close()
	res.Redis, res.Database = tg.describe()
	st := tg.state() // nil: no access to Redis and MySQL

	out.printf("seckill (%s): %d users × %d attempts, concurrency %d, stock %d, strategy %s, consumer %s, Redis %s, database %s\n",
		res.Mode, o.users, o.attempts, o.concurrency, o.stock, res.Strategy, res.Consumer, res.Redis, res.Database)

	// Users: distinct phones of this run, logged in through the real path.
	users, err := loginAll(ctx, tg, run, o, out, res)
	if err != nil {
		return err
	}
	defer func() {
		if st != nil && !o.keep {
			cleanupUsers(ctx, st, users)
		}
	}()
	if len(o.buckets) > 1 || o.buckets[0] != 1 {
		return runBucketSeries(ctx, tg.(*inprocess), st, o, users, out, res, began) // seckill_buckets.go
	}

	var ld *load
	var sales []SaleRun
	facts := *res // the run's facts; each sale starts from them, not from the last sale's figures
	for i := range o.sales {
		if o.sales > 1 {
			out.printf("  sale %d of %d\n", i+1, o.sales)
		}
		one := facts
		var err error
		if ld, err = runSale(ctx, tg, st, cfg, o, users, out, &one, i == 0); err != nil {
			return err
		}
		sales = append(sales, saleRunOf(one))
		*res = one
	}
	if o.cpuprofile != "" {
		res.CPUProfile = o.cpuprofile // of the first sale
	}
	if o.sales > 1 {
		summarizeSales(res, sales, out)
	}

	if o.report != "" {
		if err := writeReport(o.report, res, ld); err != nil {
			return fmt.Errorf("bench seckill: writing the report: %w", err)
		}
		res.Report = o.report
		out.printf("  report: %s\n", o.report)
	}
	res.ElapsedMS = ms(time.Since(began))
	if err := out.json(res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("bench seckill: %d invariant(s) violated: %s", len(res.Verification.Violations), strings.Join(res.Verification.Violations, "; "))
	}
	return nil
}

// runSale runs one sale for the logged-in users: a new voucher, redis-benchmark before and
// after (when it can), the grabs, the drain and the checks; res gets its figures. first: the
// run's first sale (-cpuprofile covers it alone).
func runSale(ctx context.Context, tg seckillTarget, st *stateAccess, cfg app.Config, o seckillOpts, users []*simUser, out *output, res *SeckillResult, first bool) (*load, error) {
	if ip, ok := tg.(*inprocess); ok && !o.consumeAfter {
		ip.startConsumer(ctx) // the last sale's end stopped it
	}
	now := time.Now()
	vid, err := tg.createVoucher(ctx, o.stock, now.Add(-time.Minute), now.Add(o.timeout+time.Hour))
	if err != nil {
		return nil, fmt.Errorf("bench seckill: creating the voucher: %w", err)
	}
	res.VoucherID = vid
	out.printf("  voucher %d created (stock %d)\n", vid, o.stock)
	defer func() {
		// Close the sale (servers retire the voucher after their linger); in-process, with
		// the consumer stopped, delete its Redis keys too.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		if err := tg.endSale(cctx, vid, o.keep); err != nil {
			fmt.Fprintf(out.errw, "bench seckill: closing the sale of voucher %d: %v\n", vid, err)
		}
	}()

	baselineOK := st != nil && st.realRedis && !o.noBaseline && cfg.SeckillStrategy == "lua"
	if baselineOK {
		rps, p50, admitted, cmd, note := seckillBaseline(ctx, st, cfg, o.baselineN)
		res.Baseline.Before, res.Baseline.P50Before, res.Baseline.Admitted, res.Baseline.Command, res.Baseline.Note = rps, p50, admitted, cmd, note
		if rps > 0 {
			out.printf("  redis-benchmark before: %.0f calls/s (p50 %.3f ms)\n", rps, p50)
		} else {
			out.printf("  redis-benchmark: %s\n", note)
		}
	} else {
		switch {
		case o.noBaseline:
			res.Baseline.Note = "-no-baseline"
		case st == nil || !st.realRedis:
			res.Baseline.Note = "no real Redis to measure"
		default:
			res.Baseline.Note = "sync strategy: no admission script"
		}
	}

	var stopProfile func()
	if o.cpuprofile != "" && first {
		var err error
		if stopProfile, err = startCPUProfile(o.cpuprofile); err != nil {
			return nil, err
		}
	}
	ld := fire(ctx, tg, users, vid, o, out)
	if stopProfile != nil {
		stopProfile()
	}
	if ip, ok := tg.(*inprocess); ok {
		ip.startConsumer(ctx) // -consume-after: now
	}
	ld.fill(res)
	out.printf("  %d grabs in %.0f ms: %.0f grabs/s; latency ms p50 %.3f p90 %.3f p99 %.3f max %.3f\n",
		res.Grabs, res.GrabMS, res.ThroughputRPS, res.LatencyJSON.P50, res.LatencyJSON.P90, res.LatencyJSON.P99, res.LatencyJSON.Max)
	oc := res.Outcomes.list()
	var parts []string
	for i, n := range oc {
		parts = append(parts, fmt.Sprintf("%s %d", outcomeNames[i], n))
	}
	out.printf("  outcomes: %s\n", strings.Join(parts, ", "))
	if res.FirstError != "" {
		out.printf("  first error: %s\n", res.FirstError)
	}

	// The consumer drains the backlog before the second baseline, so redis-benchmark does not
	// share the machine with it (which would flatter our ratio).
	var drained *drainResult
	if st != nil && st.lua {
		drained = waitDrained(ctx, st, vid, 1, o.drainTimeout)
	}
	if baselineOK && res.Baseline.Before > 0 {
		rps, _, _, _, note := seckillBaseline(ctx, st, cfg, o.baselineN)
		res.Baseline.After = rps
		if rps > 0 {
			out.printf("  redis-benchmark after: %.0f calls/s\n", rps)
			res.Baseline.RPS = (res.Baseline.Before + rps) / 2
		} else {
			res.Baseline.RPS = res.Baseline.Before
			res.Baseline.Note = "after: " + note
		}
		res.Ratio = round3(res.ThroughputRPS / res.Baseline.RPS)
		out.printf("  ours / redis-benchmark (same script, -c 50): %.3f× (mean baseline %.0f/s)\n", res.Ratio, res.Baseline.RPS)
	}

	if st == nil {
		res.Verification = Verification{Skipped: "no access to Redis and MySQL (-no-verify)"}
	} else {
		in := verifyInput{voucherID: vid, initial: o.stock, users: make([]int, len(users)), orders: make([]int64, len(users)),
			already: make([]int64, len(users)), served: make([]bool, len(users)), outcomes: res.Outcomes, dupAdmissions: ld.dupAdmissions.Load(), drainTimeout: o.drainTimeout, drained: drained}
		for i, u := range users {
			in.users[i] = u.id
			in.orders[i] = ld.orderOf[i].Load()
			in.already[i] = ld.alreadyOf[i].Load()
			in.served[i] = ld.served[i].Load()
		}
		res.Verification = verify(ctx, st, in)
	}
	res.OK = res.Verification.OK || res.Verification.Skipped != ""
	printVerification(out, res.Verification)

	return ld, nil
}

// SaleRun is one sale of a -sales series.
type SaleRun struct {
	VoucherID     int       `json:"voucher_id"`
	ThroughputRPS float64   `json:"throughput_rps"`
	LatencyJSON   LatencyMS `json:"latency_ms"`
	BaselineRPS   float64   `json:"baseline_rps,omitempty"`
	Ratio         float64   `json:"ratio_vs_redis_benchmark,omitempty"`
	OK            bool      `json:"ok"`
	Violations    []string  `json:"violations,omitempty"`
}

func saleRunOf(r SeckillResult) SaleRun {
	return SaleRun{VoucherID: r.VoucherID, ThroughputRPS: r.ThroughputRPS, LatencyJSON: r.LatencyJSON,
		BaselineRPS: r.Baseline.RPS, Ratio: r.Ratio, OK: r.OK, Violations: r.Verification.Violations}
}

// summarizeSales adds a series' sales to res (whose figures are the last sale's), the median
// of their ratios, and makes the run fail if any sale broke an invariant.
func summarizeSales(res *SeckillResult, sales []SaleRun, out *output) {
	res.Sales = sales
	var ratios []float64
	var violations []string
	out.printf("  sale  grabs/s  p99 ms  redis-benchmark/s  ratio  invariants\n")
	for i, sr := range sales {
		out.printf("  %-4d %8.0f  %6.2f  %17.0f  %5.3f  %v\n", i+1, sr.ThroughputRPS, sr.LatencyJSON.P99, sr.BaselineRPS, sr.Ratio, sr.OK)
		if sr.Ratio > 0 {
			ratios = append(ratios, sr.Ratio)
		}
		for _, v := range sr.Violations {
			violations = append(violations, fmt.Sprintf("sale %d: %s", i+1, v))
		}
		res.OK = res.OK && sr.OK
	}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		m := ratios[len(ratios)/2]
		if len(ratios)%2 == 0 {
			m = (ratios[len(ratios)/2-1] + m) / 2
		}
		res.RatioMedian = round3(m)
		out.printf("  median ratio over %d sales: %.3f×\n", len(ratios), res.RatioMedian)
	}
	if len(violations) > 0 {
		res.Verification.Violations = violations
	}
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// simUser is one simulated user.
type simUser struct {
	phone string
	id    int
	token string
}

// phones returns n distinct phones of this run: 1, a digit 5-9, a 3-digit run code, a 6-digit
// index. Random per run, because a phone gets at most one login code per 60 s.
func phones(n int) (head string, out []string) {
	head = fmt.Sprintf("1%d%03d", 5+rand.IntN(5), rand.IntN(1000))
	out = make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%06d", head, i)
	}
	return head, out
}

func loginAll(ctx context.Context, tg seckillTarget, run string, o seckillOpts, out *output, res *SeckillResult) ([]*simUser, error) {
	users := make([]*simUser, o.users)
	head, ph := phones(o.users)
	res.PhonePrefix = head
	var next, done atomic.Int64
	var firstErr atomic.Pointer[error]
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	bar := startProgress(out, "login", int64(o.users), done.Load)
	var wg sync.WaitGroup
	for range min(o.loginConc, o.users) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= o.users || lctx.Err() != nil {
					return
				}
				u := &simUser{phone: ph[i]}
				if err := tg.login(lctx, u); err != nil {
					err = fmt.Errorf("bench seckill: login of %s: %w", u.phone, err)
					if firstErr.CompareAndSwap(nil, &err) {
						cancel()
					}
					return
				}
				users[i] = u
				done.Add(1)
			}
		})
	}
	wg.Wait()
	bar.stop()
	if p := firstErr.Load(); p != nil {
		return nil, *p
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench seckill: logins: %w", err)
	}
	el := time.Since(start)
	res.LoginMS = ms(el)
	res.LoginsPerS = float64(o.users) / el.Seconds()
	out.printf("  %d users logged in in %.0f ms (%.0f/s)\n", o.users, res.LoginMS, res.LoginsPerS)
	return users, nil
}

// load is what the grab phase recorded.
type load struct {
	counts        [nOutcomes]atomic.Int64
	calls         atomic.Int64
	orderOf       []atomic.Int64 // per user index: the order id of its admitted answer
	alreadyOf     []atomic.Int64 // per user index: the order id an ALREADY_PURCHASED answer named
	served        []atomic.Bool  // per user index: a definitive answer came (admitted, sold out, already)
	dupAdmissions atomic.Int64
	firstErr      atomic.Pointer[string]
	lat           []time.Duration // per call
	at            []time.Duration // per call: completion, from the phase's start
	elapsed       time.Duration
	capped        bool
	// For false sold-outs (stock only goes down in a bench sale): when each SOLD_OUT answer
	// came, and when the last grab that was admitted was sent, from the phase's start.
	soldAt        []time.Duration
	lastAdmitSent atomic.Int64
}

// falseSoldOuts counts the SOLD_OUT answers that came before a grab sent later was admitted:
// the sale still had a unit then. A lower bound (a unit nobody grabbed later goes uncounted;
// the final unsold count shows those).
func (ld *load) falseSoldOuts() int64 {
	var n int64
	last := time.Duration(ld.lastAdmitSent.Load())
	for _, at := range ld.soldAt {
		if at < last {
			n++
		}
	}
	return n
}

func fire(ctx context.Context, tg seckillTarget, users []*simUser, vid int, o seckillOpts, out *output) *load {
	ld := &load{orderOf: make([]atomic.Int64, len(users)), alreadyOf: make([]atomic.Int64, len(users)), served: make([]atomic.Bool, len(users))}
	total := int64(len(users) * o.attempts)
	perm := rand.Perm(len(users))
	var next atomic.Int64
	var deadline time.Time
	if o.duration > 0 {
		deadline = time.Now().Add(o.duration)
	}
	var mu sync.Mutex
	start := time.Now()
	bar := startProgress(out, "grabs", total, ld.calls.Load)
	var wg sync.WaitGroup
	for w := range o.concurrency {
		wg.Go(func() {
			lat := make([]time.Duration, 0, int(total)/o.concurrency+16)
			at := make([]time.Duration, 0, cap(lat))
			var soldAt []time.Duration
			defer func() {
				mu.Lock()
				ld.lat = append(ld.lat, lat...)
				ld.at = append(ld.at, at...)
				ld.soldAt = append(ld.soldAt, soldAt...)
				mu.Unlock()
			}()
			for n := 0; ; n++ {
				i := next.Add(1) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				if !deadline.IsZero() && n&15 == 0 && time.Now().After(deadline) {
					ld.capped = true
					return
				}
				ui := perm[i%int64(len(users))]
				for retry := 0; ; retry++ {
					t0 := time.Now()
					oc, orderID, err := tg.grab(ctx, w, users[ui], vid)
					t1 := time.Now()
					lat = append(lat, t1.Sub(t0))
					at = append(at, t1.Sub(start))
					ld.calls.Add(1)
					ld.counts[oc].Add(1)
					if oc == oAdmitted || oc == oSoldOut || oc == oAlready {
						ld.served[ui].Store(true)
					}
					switch oc {
					case oAdmitted:
						if !ld.orderOf[ui].CompareAndSwap(0, orderID) {
							ld.dupAdmissions.Add(1)
						}
						for sent := int64(t0.Sub(start)); ; {
							last := ld.lastAdmitSent.Load()
							if sent <= last || ld.lastAdmitSent.CompareAndSwap(last, sent) {
								break
							}
						}
					case oSoldOut:
						soldAt = append(soldAt, t1.Sub(start))
					case oAlready:
						ld.alreadyOf[ui].Store(orderID)
					case oError:
						if err != nil {
							s := err.Error()
							ld.firstErr.CompareAndSwap(nil, &s)
						}
					}
					// NOT_READY means "retry in a moment": a rebuild is running. Bounded.
					if oc != oNotReady || retry >= 100 || ctx.Err() != nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	ld.elapsed = time.Since(start)
	bar.stop()
	return ld
}

func (ld *load) fill(res *SeckillResult) {
	res.Grabs = ld.calls.Load()
	res.GrabMS = ms(ld.elapsed)
	if ld.elapsed > 0 {
		res.ThroughputRPS = float64(res.Grabs) / ld.elapsed.Seconds()
	}
	var c [nOutcomes]int64
	for i := range c {
		c[i] = ld.counts[i].Load()
	}
	res.Outcomes = Outcomes{c[oAdmitted], c[oSoldOut], c[oAlready], c[oRateLimited], c[oNotReady], c[oError]}
	if p := ld.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.Capped = ld.capped
	slices.Sort(ld.lat)
	res.LatencyJSON = latencyMS(ld.lat)
	step := time.Duration(res.SeriesStepMS) * time.Millisecond
	res.Series = make([]int64, int(ld.elapsed/step)+1)
	for _, a := range ld.at {
		if i := int(a / step); i < len(res.Series) {
			res.Series[i]++
		}
	}
}

// latencyMS summarises sorted latencies.
func latencyMS(s []time.Duration) LatencyMS {
	if len(s) == 0 {
		return LatencyMS{}
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	at := func(q float64) float64 { return ms(s[min(len(s)-1, int(q*float64(len(s))))]) }
	return LatencyMS{N: len(s), Mean: ms(sum / time.Duration(len(s))), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(s[len(s)-1])}
}

// progress draws a bar on stderr when it is a terminal, else a line every few seconds.
type progress struct {
	stopc chan struct{}
	wg    sync.WaitGroup
}

func startProgress(out *output, label string, total int64, done func() int64) *progress {
	p := &progress{stopc: make(chan struct{})}
	tty := false
	if f, ok := out.errw.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	start := time.Now()
	draw := func(final bool) {
		n := done()
		el := time.Since(start).Seconds()
		rate := 0.0
		if el > 0 {
			rate = float64(n) / el
		}
		if tty {
			const width = 30
			fill := int(float64(width) * float64(n) / float64(max(total, 1)))
			fmt.Fprintf(out.errw, "\r  %-6s [%s%s] %3.0f%% %d/%d %.0f/s ", label, strings.Repeat("#", fill), strings.Repeat(" ", width-fill),
				100*float64(n)/float64(max(total, 1)), n, total, rate)
			if final {
				fmt.Fprintln(out.errw)
			}
		} else if !final {
			fmt.Fprintf(out.errw, "  %s: %d/%d (%.0f%%), %.0f/s\n", label, n, total, 100*float64(n)/float64(max(total, 1)), rate)
		}
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				draw(true)
				return
			case <-t.C:
				draw(false)
			}
		}
	})
	return p
}

func (p *progress) stop() { close(p.stopc); p.wg.Wait() }
