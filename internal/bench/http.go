package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/commalist"
	"github.com/surgekit/surge/internal/floor"
)

const httpHelp = `surge bench http: grab latency and throughput of servers under an open-loop (constant-rate) load.

  surge bench http -target http://host:8080 [-rate 2000 | -rates 1000,2000,4000,8000] [-duration 10s] [flags] [config flags]
  surge bench http -floors [-target ...] -redis-addrs 127.0.0.1:6379 [flags]

Each target gets -users users of its own, logged in through it first (sendLoginCode's dev code,
then login: the servers must run in dev mode), and a SECKILL voucher created by an admin
(-admin-phone or -admin-token; stock -stock) unless -voucher names one. Every user then grabs
once, unmeasured, at the lowest rate (-warmup; -warmup=false measures first grabs too), so
that the steps meet the steady state, buyers who hold an order (ALREADY_PURCHASED), on warm
connections and servers. Then
seckillVoucher grabs are sent at -rate per second for -duration, each request the next user's
session in turn.

The load is an open loop: request i is due at start + i/rate whatever the answers do, and its
latency is measured from when it was due, not from when it went out, so a server that stalls
shows the stall in the tail for every request due during it (a closed loop, -closed N, hides
it: its clients stop sending while they wait). At most -max-in-flight requests are in flight;
a request due while all are taken waits for one and is counted (no_slot), as is any request
sent more than 1 ms after it was due (late); the wait is part of its latency. Requests due but
not sent by the step's end (plus a tenth of it) are counted as not_sent.

-rates runs a sweep: every rate against every target, rate by rate (the targets interleaved,
so they share the machine's state), and reports the latency curve (p50/p99 against offered
rate) and, per target, the highest rate up to which p99 stays within -p99-max (with errors
and requests not sent at most 0.1 %). -svg writes the curve as an SVG plot.

-repeat N runs every step N times (the rounds interleaved across the targets, like the
steps). A step's figures are then those of its round with the median p99 (the upper median
for even N), each round is kept beside them, and the step holds the bound when more than
half of its rounds hold it: on a shared machine a single stall of a few hundred ms decides
one round's p99, and the median shows the rate a server keeps rather than the stall it met.
The highest rate every round held is given too (max_rate_p99_ok_every_round).

-floors adds two servers in this process, on loopback, on the Redis of the config flags
(SURGE_REDIS_ADDRS, -redis-addrs: give the deployment's, to compare like with like):
  floor0  reads the request, writes a fixed answer: what HTTP costs
  floor2  the session lookup the server makes (HGETALL of <ns>:login:token:<sha256>) and one
          grab by the server's admission script (EVALSHA seckill_grab.lua), unbatched: what
          a grab's Redis work costs
with sessions and a sale of their own (keys under bench-floor-<run>:, deleted after). Their
rows come first, and each target's p99 is also given as a multiple of floor2's at that rate.
-floors-process serves them from a child process instead (this binary, re-executed): a process
of its own, like the server they are compared with, rather than one sharing this process's
CPU and Go runtime with the load; prefer it when the target runs on the same machine.

-vegeta PATH runs vegeta (github.com/tsenart/vegeta) after each step, against the same target
at the same rate with the same requests, and reports its p50/p99/max beside ours.

With the deployment's SURGE_REDIS_ADDRS and SURGE_NAMESPACE given, the simulated users' login
keys and sessions are deleted after the run (else they expire: sessions after 30 min idle); a
voucher the run created is closed (updateVoucher endAt: now). The rows print as each step ends;
the last stdout line is one JSON object with all figures.
`

// HTTPResult is the final JSON line of the http scenario.
type HTTPResult struct {
	Scenario    string             `json:"scenario"`
	Mode        string             `json:"mode"` // open or closed
	Run         string             `json:"run"`
	Users       int                `json:"users"`
	Floors      string             `json:"floors,omitempty"`  // where the floors ran: in-process or process
	Rates       []float64          `json:"rates,omitempty"`   // open loop: offered rates, per second
	Workers     int                `json:"workers,omitempty"` // closed loop
	StepMS      float64            `json:"step_ms"`
	MaxInFlight int                `json:"max_in_flight"`
	P99MaxMS    float64            `json:"p99_max_ms"`
	Repeat      int                `json:"repeat"` // rounds of each step; a step's figures are its median round's
	Targets     []HTTPTargetResult `json:"targets"`
	LoadBefore  string             `json:"load_average_before,omitempty"` // /proc/loadavg: was the machine busy?
	LoadAfter   string             `json:"load_average_after,omitempty"`
	SVG         string             `json:"svg,omitempty"`
	ElapsedMS   float64            `json:"elapsed_ms"`
}

// HTTPTargetResult is one server's figures.
type HTTPTargetResult struct {
	Name        string       `json:"name"` // floor0, floor2, the name given with -target name=URL, or the URL
	Kind        string       `json:"kind"` // floor0, floor2 or target
	URL         string       `json:"url"`
	VoucherID   int          `json:"voucher_id,omitempty"`
	PhonePrefix string       `json:"phone_prefix,omitempty"` // target: its users' phones start with it
	Steps       []StepResult `json:"steps"`
	// MaxRateP99OK is the highest offered rate up to which every step held p99 ≤ p99_max_ms
	// with errors and unsent requests ≤ 0.1 % (0: not even the lowest).
	MaxRateP99OK float64 `json:"max_rate_p99_ok,omitempty"`
	// MaxRateVsFloor2 is MaxRateP99OK over floor2's, when floor2 ran.
	MaxRateVsFloor2 float64 `json:"max_rate_vs_floor2,omitempty"`
	// With -repeat: the highest rate up to which every round of every step held (not just
	// the majority), and its ratio to floor2's.
	MaxRateEveryRound         float64 `json:"max_rate_p99_ok_every_round,omitempty"`
	MaxRateEveryRoundVsFloor2 float64 `json:"max_rate_every_round_vs_floor2,omitempty"`
	Warmup                    *Warmup `json:"warmup,omitempty"`
}

// Warmup is what the unmeasured grab of every user before the steps was answered.
type Warmup struct {
	Outcomes map[string]int64 `json:"outcomes"`
	Errors   map[string]int64 `json:"errors"`
	MS       float64          `json:"ms"`
}

// StepResult is one step on one target.
type StepResult struct {
	Rate         float64 `json:"rate,omitempty"`      // open loop: offered, per second
	Workers      int     `json:"workers,omitempty"`   // closed loop
	Scheduled    int     `json:"scheduled,omitempty"` // open loop: requests due within the step
	Sent         int     `json:"sent"`
	NotSent      int     `json:"not_sent"` // due, but not sent before the step ended
	NoSlot       int     `json:"no_slot"`  // due while all -max-in-flight slots were taken
	Late         int     `json:"late"`     // sent more than 1 ms after due
	MaxLagMS     float64 `json:"max_send_lag_ms"`
	MostInFlight int     `json:"most_in_flight"`
	// SentRPS is the rate requests went out at (sent over the span of their send times):
	// the offered rate, if the schedule held.
	SentRPS float64 `json:"sent_rps"`
	// ThroughputRPS is requests answered (or failed) per second, from the step's start to its
	// last answer (vegeta's "throughput"): a slow last answer lowers it.
	ThroughputRPS float64 `json:"throughput_rps"`
	OKRPS         float64 `json:"ok_rps"`     // definitive grab answers per second, the same way
	Latency       TailMS  `json:"latency_ms"` // from each request's due time: what a buyer arriving then waits
	// FromSend is the latency from each request's actual send, as vegeta and closed loops
	// measure it: apart from Latency by the time requests waited to go out (the in-flight
	// bound, or this process short of CPU).
	FromSend    TailMS           `json:"latency_from_send_ms"`
	Outcomes    map[string]int64 `json:"outcomes"`
	Errors      map[string]int64 `json:"errors"`
	P99VsFloor2 float64          `json:"p99_vs_floor2,omitempty"` // this p99 over floor2's in the same sweep step
	// ThroughputVsFloor2 is answers/s over floor2's in the same step (a closed loop's figure).
	ThroughputVsFloor2 float64       `json:"throughput_vs_floor2,omitempty"`
	Vegeta             *VegetaResult `json:"vegeta,omitempty"`
	// With -repeat: which round this is (from 1); on a step, its rounds, the step's figures
	// being the median round's, and how many rounds held the p99 bound.
	Round      int          `json:"round,omitempty"`
	Rounds     []StepResult `json:"rounds,omitempty"`
	RoundsHeld int          `json:"rounds_held,omitempty"`
}

type httpOpts struct {
	rate, p99Max                float64 // p99Max in ms
	rates                       []float64
	closed, repeat              int
	duration, timeout, runLimit time.Duration
	maxInFlight                 int
	users, loginConc, stock     int
	voucher                     int
	floors, floorsProcess       bool
	warmup                      bool
	targets                     []string
	adminPhone, adminToken      string
	svg, vegeta                 string
}

// grabTarget is one server under load: where to send, and the sessions to send with.
type grabTarget struct {
	res    HTTPTargetResult
	client *http.Client
	body   []byte
	tokens []string
	next   int // the next request's number: steps go on through the users
}

// definitive are the outcomes that answer a grab (the others ask to retry).
var definitive = map[string]bool{"admitted": true, "already_purchased": true, "sold_out": true}

// isOutcome tells an answer's class from an error kind.
func isOutcome(class string) bool {
	return slices.Contains(outcomeNames[:oError], class)
}

func runHTTP(ctx context.Context, args []string, out *output) error {
	fs := flag.NewFlagSet("surge bench http", flag.ContinueOnError)
	fs.SetOutput(out.errw)
	fs.Usage = func() {
		fmt.Fprint(out.errw, httpHelp, "\nFlags:\n")
		fs.PrintDefaults()
	}
	build := app.ConfigFlags(fs, nil)
	var o httpOpts
	var targets listFlag
	var rates string
	fs.Var(&targets, "target", "server URL(s), comma-separated or repeated, each measured apart (/query is added to a bare host); name=URL names it in the tables and the plot")
	fs.BoolVar(&o.floors, "floors", false, "also measure floor0 and floor2, run in this process on the Redis of the config flags")
	fs.BoolVar(&o.floorsProcess, "floors-process", false, "-floors in a child process (this binary) instead: a process of their own, like the servers they are compared with")
	fs.Float64Var(&o.rate, "rate", 1000, "open loop: requests per second")
	fs.StringVar(&rates, "rates", "", "open loop sweep: comma-separated rates per second, e.g. 1000,2000,4000,8000")
	fs.IntVar(&o.closed, "closed", 0, "closed loop instead: this many workers, each sending when its last answer came")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each step (each rate on each target)")
	fs.IntVar(&o.repeat, "repeat", 1, "rounds of each step; a step's figures are its median round's (by p99; closed loop: by answers/s), and it holds the p99 bound when most rounds do")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 1000, "open loop: requests in flight at most; one due when all are taken waits (no_slot)")
	fs.DurationVar(&o.timeout, "grab-timeout", 10*time.Second, "deadline of each request")
	p99Max := fs.Duration("p99-max", 25*time.Millisecond, "sweep: the p99 bound for the highest rate that holds it")
	fs.BoolVar(&o.warmup, "warmup", true, "before the steps, one grab per user at the lowest rate (not measured): every step then meets the steady state, users who hold an order (ALREADY_PURCHASED), on warm connections and servers; -warmup=false measures first grabs too")
	fs.IntVar(&o.users, "users", 2000, "users per target, each logged in; requests take their sessions in turn")
	fs.IntVar(&o.loginConc, "login-concurrency", 64, "logins in flight at once")
	fs.IntVar(&o.stock, "stock", -1, "units of the voucher created; -1 = users (every user admitted once)")
	fs.IntVar(&o.voucher, "voucher", 0, "grab this existing SECKILL voucher instead of creating one (no admin needed)")
	fs.StringVar(&o.adminPhone, "admin-phone", app.DevAdminPhone, "phone of an admin of the targets (SURGE_ADMIN_PHONES), to create the voucher")
	fs.StringVar(&o.adminToken, "admin-token", "", "an admin's session token instead of logging in as -admin-phone")
	fs.StringVar(&o.svg, "svg", "", "write the latency curve (p50 and p99 against offered rate) to this SVG file")
	fs.StringVar(&o.vegeta, "vegeta", "", "path of a vegeta binary: run it after each step at the same rate, for comparison")
	fs.DurationVar(&o.runLimit, "timeout", 30*time.Minute, "bound on the whole run")
	jsonOnly := fs.Bool("json-only", false, "print only the final JSON line")
	fs.BoolVar(jsonOnly, "json", false, "the same as -json-only")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench http: unexpected argument %q", fs.Arg(0))
	}
	out.jsonOnly = *jsonOnly
	o.targets = targets
	o.p99Max = ms(*p99Max)
	rateSet := false
	fs.Visit(func(f *flag.Flag) { rateSet = rateSet || f.Name == "rate" })
	cfg, err := build()
	if err != nil {
		return err
	}
	for _, r := range commalist.Split(rates) {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("bench http: -rates: %q is not a positive rate", r)
		}
		o.rates = append(o.rates, v)
	}
	slices.Sort(o.rates)
	o.rates = slices.Compact(o.rates)
	if len(o.rates) == 0 && o.closed == 0 {
		o.rates = []float64{o.rate}
	}
	if o.stock < 0 {
		o.stock = o.users
	}
	switch {
	case len(o.targets) == 0 && !o.floors:
		return errors.New("bench http: give -target URL[,URL...] and/or -floors")
	case o.floorsProcess && !o.floors:
		return errors.New("bench http: -floors-process goes with -floors")
	case o.floors && len(cfg.RedisAddrs) == 0:
		return errors.New("bench http: -floors runs floor2 on a real Redis: give the deployment's (SURGE_REDIS_ADDRS or -redis-addrs)")
	case o.closed < 0 || o.closed > 100_000:
		return errors.New("bench http: -closed in [0, 100000]")
	case o.closed > 0 && (rates != "" || rateSet):
		return errors.New("bench http: -closed is a closed loop: no -rate or -rates with it")
	case o.rate <= 0:
		return errors.New("bench http: -rate must be positive")
	case o.duration <= 0 || o.timeout <= 0 || o.runLimit <= 0:
		return errors.New("bench http: -duration, -grab-timeout and -timeout must be positive")
	case o.maxInFlight < 1 || o.maxInFlight > 100_000:
		return errors.New("bench http: -max-in-flight in [1, 100000]")
	case o.users < 1 || o.users > 1_000_000 || o.loginConc < 1 || o.loginConc > 10_000:
		return errors.New("bench http: -users in [1, 1000000], -login-concurrency in [1, 10000]")
	case o.p99Max <= 0:
		return errors.New("bench http: -p99-max must be positive")
	case o.repeat < 1 || o.repeat > 100:
		return errors.New("bench http: -repeat in [1, 100]")
	}
	names := map[string]bool{"floor0": true, "floor2": true}
	for _, raw := range o.targets {
		name, _ := splitTarget(raw)
		if name != "" && names[name] {
			return fmt.Errorf("bench http: -target name %q is taken (floor0, floor2 or another target's)", name)
		}
		names[name] = true
	}
	for _, r := range o.rates {
		if r*o.duration.Seconds() > maxShots {
			return fmt.Errorf("bench http: %g/s for %v is more than %d requests in one step", r, o.duration, maxShots)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.runLimit)
	defer cancel()
	began := time.Now()
	res := &HTTPResult{Scenario: "http", Mode: "open", Run: runID(), Users: o.users, Rates: o.rates, StepMS: ms(o.duration),
		MaxInFlight: o.maxInFlight, P99MaxMS: o.p99Max, Repeat: o.repeat, LoadBefore: loadAverage()}
	if o.closed > 0 {
		res.Mode, res.Workers = "closed", o.closed
	}
	if o.floors {
		res.Floors = "in-process"
		if o.floorsProcess {
			res.Floors = "process"
		}
	}

	var loads []*grabTarget
	if o.floors {
		fl, stop, err := startFloors(ctx, cfg, res.Run, o, out)
		if err != nil {
			return err
		}
		defer stop()
		loads = append(loads, fl...)
	}
	for _, raw := range o.targets {
		g, stop, err := prepareTarget(ctx, cfg, raw, o, out)
		if err != nil {
			return err
		}
		defer stop()
		loads = append(loads, g)
	}

	if o.warmup {
		warmRate := 1000.0 // closed loop: a rate of no consequence
		if len(o.rates) > 0 {
			warmRate = o.rates[0]
		}
		for _, g := range loads {
			g.warm(ctx, o, warmRate)
			out.printf("  %s: warm-up, one grab per user: %s\n", g.res.Name, counts(g.res.Warmup.Outcomes, g.res.Warmup.Errors))
		}
		// The warm-up's admissions leave the servers' consumers orders to write: measured at
		// once, the first step met that work (p50 100× the later steps' on a busy machine).
		time.Sleep(warmupSettle)
	}
	out.printf("http (%s loop): %d targets, steps of %v, %d users each; in flight ≤ %d; load average %s\n",
		res.Mode, len(loads), o.duration, o.users, o.maxInFlight, res.LoadBefore)
	out.printf("  %-30s %8s %8s %7s %6s %8s %9s %8s %8s %8s %8s %8s  %s\n", "target", "rate/s", "sent", "no-slot", "late",
		"sent/s", "answers/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "outcomes; errors")
	steps := o.rates
	if o.closed > 0 {
		steps = []float64{0}
	}
	for si, rate := range steps {
		rounds := make([][]StepResult, len(loads))
		for r := range o.repeat {
			for gi, g := range loads {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				st := loadStep{rate: rate, workers: o.closed, duration: o.duration, maxInFlight: o.maxInFlight, timeout: o.timeout}
				run := runStep(ctx, st, g.next, g.shoot)
				g.next += len(run.shots) + run.notSent
				sr := summarizeStep(st, run)
				name := g.res.Name
				if o.repeat > 1 {
					sr.Round = r + 1
					name = fmt.Sprintf("%s [%d/%d]", clip(name, 22), r+1, o.repeat)
				}
				printStep(out, name, sr)
				if o.vegeta != "" || sr.Late*100 > sr.Sent {
					// Requests went out late: the latency from their actual send too, the
					// figure a tool without a schedule reports.
					f := sr.FromSend
					out.printf("  %-30s %8s %8s %7s %6s %8s %9s %8.3f %8.3f %8.3f %8.3f %8.3f\n", "  (from send, same step)", "", "", "", "", "", "",
						f.P50, f.P90, f.P99, f.P999, f.Max)
				}
				if o.vegeta != "" {
					time.Sleep(stepPause)
					sr.Vegeta = runVegeta(ctx, o.vegeta, g, st)
					printVegeta(out, sr.Vegeta)
				}
				rounds[gi] = append(rounds[gi], sr)
				if si < len(steps)-1 || r < o.repeat-1 || g != loads[len(loads)-1] {
					time.Sleep(stepPause) // let the last step's stragglers and garbage settle
				}
			}
		}
		for gi, g := range loads {
			sr := medianRound(rounds[gi], o.p99Max)
			if o.repeat > 1 {
				printStep(out, clip(g.res.Name, 22)+" [median]", sr)
			}
			g.res.Steps = append(g.res.Steps, sr)
		}
	}
	compare(o, loads)
	for _, g := range loads {
		res.Targets = append(res.Targets, g.res)
	}
	printSummary(out, res)
	if o.svg != "" {
		if err := writeLatencySVG(o.svg, res); err != nil {
			return fmt.Errorf("bench http: writing %s: %w", o.svg, err)
		}
		res.SVG = o.svg
		out.printf("  latency curve: %s\n", o.svg)
	}
	res.LoadAfter = loadAverage()
	res.ElapsedMS = ms(time.Since(began))
	return out.json(res)
}

// stepPause separates steps; warmupSettle follows the warm-up.
const (
	stepPause    = 500 * time.Millisecond
	warmupSettle = 2 * time.Second
)

// newLoadClient is the HTTP client of one target: keep-alive connections for every request
// in flight, no compression (the servers' answers are small), no proxy.
func newLoadClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// prepareTarget logs the target's users in and creates (or takes) its voucher. stop closes
// the sale it created and deletes the users' login keys when the config names the Redis.
func prepareTarget(ctx context.Context, cfg app.Config, target string, o httpOpts, out *output) (*grabTarget, func(), error) {
	name, raw := splitTarget(target)
	so := seckillOpts{targets: []string{raw}, concurrency: o.maxInFlight, loginConc: o.loginConc, noVerify: true,
		adminPhone: o.adminPhone, adminToken: o.adminToken, users: o.users}
	tg, err := newHTTPTarget(ctx, cfg, so)
	if err != nil {
		return nil, nil, fmt.Errorf("bench http: %w", err)
	}
	url := tg.urls[0]
	out.printf("  %s: logging %d users in\n", url, o.users)
	var logins SeckillResult
	users, err := loginAll(ctx, tg, runID(), so, out, &logins)
	if err != nil {
		tg.close()
		return nil, nil, fmt.Errorf("bench http: %s: %w", url, err)
	}
	var st *stateAccess
	if len(cfg.RedisAddrs) > 0 {
		st = &stateAccess{rdb: floor.Client(cfg.RedisAddrs, cfg.RedisPassword, 0), logins: auth.KeysIn(cfg.Namespace)}
	}
	created := 0
	if o.voucher > 0 {
		tg.useVoucher(o.voucher)
	} else {
		now := time.Now()
		created, err = tg.createVoucher(ctx, o.stock, now.Add(-time.Minute), now.Add(o.runLimit+time.Hour))
		if err != nil {
			err = fmt.Errorf("bench http: %s: creating the voucher: %w", url, err)
		}
	}
	stop := func() {
		if created > 0 {
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if err := tg.endSale(cctx, created, false); err != nil {
				fmt.Fprintf(out.errw, "bench http: closing the sale of voucher %d on %s: %v\n", created, url, err)
			}
			ccancel()
		}
		if st != nil {
			cleanupUsers(ctx, st, users)
			_ = st.rdb.Close()
		}
		tg.close()
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	g := &grabTarget{client: newLoadClient(o.maxInFlight), body: tg.grabBody, tokens: make([]string, len(users)),
		res: HTTPTargetResult{Name: cmp.Or(name, url), Kind: "target", URL: url, VoucherID: max(created, o.voucher), PhonePrefix: logins.PhonePrefix}}
	for i, u := range users {
		g.tokens[i] = u.token
	}
	return g, func() { g.client.CloseIdleConnections(); stop() }, nil
}

// startFloors serves floor0 and floor2 on loopback, floor2 on cfg's Redis with sessions and a
// sale under a namespace of this run; stop shuts them and deletes floor2's keys.
func startFloors(ctx context.Context, cfg app.Config, run string, o httpOpts, out *output) ([]*grabTarget, func(), error) {
	rdb := floor.Client(cfg.RedisAddrs, cfg.RedisPassword, cfg.RedisPoolSize)
	var stops []func()
	stop := func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	stops = append(stops, func() { _ = rdb.Close() })
	fail := func(err error) ([]*grabTarget, func(), error) {
		stop()
		return nil, nil, fmt.Errorf("bench http: floors: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fail(fmt.Errorf("Redis %s is not answering: %w", strings.Join(cfg.RedisAddrs, ","), err))
	}
	ns := "bench-floor-" + run
	g2, err := floor.NewGrab(ctx, rdb, floor.GrabOptions{Namespace: ns})
	if err != nil {
		return fail(err)
	}
	stops = append(stops, func() { _ = g2.Close(ctx) })
	tokens2, err := g2.Sessions(ctx, o.users)
	if err != nil {
		return fail(err)
	}
	// floor0 reads no session: tokens of the same shape, so the requests are the same size.
	tokens0 := make([]string, o.users)
	for i := range tokens0 {
		tokens0[i] = fmt.Sprintf("floor0-token-%030d", i)
	}
	var urls [2]string
	var stopServing func()
	where := "this process"
	if o.floorsProcess {
		urls, stopServing, err = startFloorProcess(ctx, cfg.RedisAddrs, cfg.RedisPassword, cfg.RedisPoolSize, ns)
		where = "a process of their own"
	} else {
		urls, stopServing, err = serveFloors(rdb, ns)
	}
	if err != nil {
		return fail(err)
	}
	stops = append(stops, stopServing)
	body := gqlBody(`mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId } }`, map[string]any{"v": strconv.Itoa(floor.Voucher)})
	var loads []*grabTarget
	for i, tokens := range [][]string{tokens0, tokens2} {
		kind := fmt.Sprintf("floor%d", 2*i)
		client := newLoadClient(o.maxInFlight)
		stops = append(stops, client.CloseIdleConnections)
		loads = append(loads, &grabTarget{client: client, body: body, tokens: tokens,
			res: HTTPTargetResult{Name: kind, Kind: kind, URL: urls[i], VoucherID: floor.Voucher}})
	}
	out.printf("  floors on loopback, in %s: floor0 (fixed answer), floor2 (session lookup + grab script, Redis %s)\n", where, strings.Join(cfg.RedisAddrs, ","))
	return loads, stop, nil
}

// warm sends every user's grab once before the steps, in an open loop at rate: the first
// grabs (admissions, and the orders the servers' consumers then write) stay out of the
// measured steps, and the client's connections, the servers' pools, caches and heaps are
// warmed by the load's own pattern (warmed by a closed loop instead, the first step still
// measured p50 40 ms where the next ones measured 1-3 ms). The steps start again at the first
// user.
func (g *grabTarget) warm(ctx context.Context, o httpOpts, rate float64) {
	start := time.Now()
	n := len(g.tokens)
	// Half a request's interval more, so that exactly n fall due.
	d := time.Duration((float64(n) + 0.5) / rate * float64(time.Second))
	run := runStep(ctx, loadStep{rate: rate, duration: d, maxInFlight: o.maxInFlight, timeout: o.timeout}, 0, g.shoot)
	sr := summarizeStep(loadStep{rate: rate}, run)
	g.res.Warmup = &Warmup{Outcomes: sr.Outcomes, Errors: sr.Errors, MS: ms(time.Since(start))}
	g.next = len(run.shots) + run.notSent
}

// shoot sends grab number i with the next user's session and classifies the answer.
func (g *grabTarget) shoot(ctx context.Context, i int) string {
	req, err := graphqlRequest(ctx, g.res.URL, g.body, g.tokens[i%len(g.tokens)])
	if err != nil {
		return "request"
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return errorKind(err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return errorKind(err)
	}
	return answerClass(resp.StatusCode, b)
}

// answerClass classifies a seckillVoucher answer: an outcome name, or an error kind
// ("code_<CODE>" for another GraphQL error, "http_<status>", "bad_answer").
func answerClass(status int, body []byte) string {
	var r struct {
		Data struct {
			S *struct {
				OrderID string `json:"orderId"`
			} `json:"seckillVoucher"`
		} `json:"data"`
		Errors []gqlError `json:"errors"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		if status != http.StatusOK {
			return "http_" + strconv.Itoa(status)
		}
		return "bad_answer"
	}
	if len(r.Errors) > 0 {
		if oc, ok := refusalOutcomes[r.Errors[0].Extensions.Code]; ok {
			return outcomeNames[oc]
		}
		if c := r.Errors[0].Extensions.Code; c != "" {
			return "code_" + c
		}
		return "http_" + strconv.Itoa(status)
	}
	if status != http.StatusOK {
		return "http_" + strconv.Itoa(status)
	}
	if r.Data.S == nil || r.Data.S.OrderID == "" {
		return "bad_answer"
	}
	return outcomeNames[oAdmitted]
}

// errorKind names a failed request's error.
func errorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection_reset"
	}
	return "transport"
}

// summarizeStep turns a step's records into its figures.
func summarizeStep(st loadStep, run *stepRun) StepResult {
	sr := StepResult{Rate: st.rate, Workers: st.workers, Scheduled: run.scheduled, Sent: len(run.shots), NotSent: run.notSent,
		NoSlot: run.noSlot, MostInFlight: run.inFlight, Outcomes: map[string]int64{}, Errors: map[string]int64{}}
	lat := make([]time.Duration, len(run.shots))
	fromSend := make([]time.Duration, len(run.shots))
	var maxLag time.Duration
	firstSend, lastSend := time.Duration(math.MaxInt64), time.Duration(0)
	ok := 0
	for i, s := range run.shots {
		lat[i], fromSend[i] = s.latency, s.latency-s.lag
		maxLag = max(maxLag, s.lag)
		firstSend, lastSend = min(firstSend, s.due+s.lag), max(lastSend, s.due+s.lag)
		if s.lag > lateAfter {
			sr.Late++
		}
		if isOutcome(s.class) {
			sr.Outcomes[s.class]++
			if definitive[s.class] {
				ok++
			}
		} else {
			sr.Errors[s.class]++
		}
	}
	if run.notSent > 0 {
		sr.Errors["not_sent"] = int64(run.notSent)
	}
	sr.MaxLagMS = ms(maxLag)
	sr.Latency, sr.FromSend = tailOf(lat), tailOf(fromSend)
	if len(run.shots) > 1 && lastSend > firstSend {
		sr.SentRPS = round3(float64(len(run.shots)-1) / (lastSend - firstSend).Seconds())
	}
	if run.elapsed > 0 {
		sr.ThroughputRPS = round3(float64(len(run.shots)) / run.elapsed.Seconds())
		sr.OKRPS = round3(float64(ok) / run.elapsed.Seconds())
	}
	return sr
}

// failures are the step's errors and unsent requests (not_sent is among the errors).
func (s StepResult) failures() int64 {
	var n int64
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// holds reports whether the step kept p99 within bound with at most 0.1 % failures; a
// repeated step holds when more than half of its rounds did.
func (s StepResult) holds(p99Max float64) bool {
	if len(s.Rounds) > 0 {
		return s.RoundsHeld*2 > len(s.Rounds)
	}
	total := max(s.Scheduled, s.Sent)
	return s.Sent > 0 && s.Latency.P99 <= p99Max && float64(s.failures()) <= 0.001*float64(total)
}

// medianRound is a step's result from its rounds: the figures of the round with the median
// p99 (the upper median; closed loop: the median answers/s), the rounds kept beside them. One
// round is the step itself.
func medianRound(rounds []StepResult, p99Max float64) StepResult {
	if len(rounds) == 1 {
		return rounds[0]
	}
	order := slices.Clone(rounds)
	slices.SortStableFunc(order, func(a, b StepResult) int {
		if a.Workers > 0 {
			return cmp.Compare(a.ThroughputRPS, b.ThroughputRPS)
		}
		return cmp.Compare(a.Latency.P99, b.Latency.P99)
	})
	m := order[len(order)/2]
	m.Rounds = rounds
	for _, r := range rounds {
		if r.holds(p99Max) {
			m.RoundsHeld++
		}
	}
	return m
}

// compare fills the sweep's verdicts: each target's highest rate holding the p99 bound (every
// lower rate holding it too), and the ratios to floor2 measured in the same run.
func compare(o httpOpts, loads []*grabTarget) {
	var f2 *grabTarget
	for _, g := range loads {
		if g.res.Kind == "floor2" {
			f2 = g
		}
	}
	for _, g := range loads {
		if o.closed == 0 {
			held, heldEveryRound := true, o.repeat > 1
			for _, s := range g.res.Steps {
				if held = held && s.holds(o.p99Max); held {
					g.res.MaxRateP99OK = s.Rate
				}
				if heldEveryRound = heldEveryRound && s.RoundsHeld == len(s.Rounds); heldEveryRound {
					g.res.MaxRateEveryRound = s.Rate
				}
			}
		}
		if f2 == nil || g.res.Kind != "target" {
			continue
		}
		for i := range g.res.Steps {
			if f := f2.res.Steps[i].Latency.P99; f > 0 {
				g.res.Steps[i].P99VsFloor2 = round3(g.res.Steps[i].Latency.P99 / f)
			}
			if f := f2.res.Steps[i].ThroughputRPS; f > 0 {
				g.res.Steps[i].ThroughputVsFloor2 = round3(g.res.Steps[i].ThroughputRPS / f)
			}
		}
		if f2.res.MaxRateP99OK > 0 {
			g.res.MaxRateVsFloor2 = round3(g.res.MaxRateP99OK / f2.res.MaxRateP99OK)
		}
		if f2.res.MaxRateEveryRound > 0 {
			g.res.MaxRateEveryRoundVsFloor2 = round3(g.res.MaxRateEveryRound / f2.res.MaxRateEveryRound)
		}
	}
}

func printStep(out *output, name string, s StepResult) {
	rate := strconv.FormatFloat(s.Rate, 'f', -1, 64)
	if s.Workers > 0 {
		rate = fmt.Sprintf("closed %d", s.Workers)
	}
	out.printf("  %-30s %8s %8d %7d %6d %8.0f %9.0f %8.3f %8.3f %8.3f %8.3f %8.3f  %s\n", clip(name, 30), rate, s.Sent, s.NoSlot, s.Late,
		s.SentRPS, s.ThroughputRPS, s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.P999, s.Latency.Max, counts(s.Outcomes, s.Errors))
}

// splitTarget splits a -target of the form name=URL (a name holds no "/"); a bare URL has no
// name, and the tables and the plot call it by its URL.
func splitTarget(target string) (name, url string) {
	if n, u, ok := strings.Cut(target, "="); ok && n != "" && !strings.ContainsAny(n, "/:") {
		return n, u
	}
	return "", target
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}

// counts lists outcome and error counts, largest first: "already_purchased 9000, admitted 1000; timeout 2".
func counts(outcomes, errs map[string]int64) string {
	list := func(m map[string]int64) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if m[a] != m[b] {
				return int(m[b] - m[a])
			}
			return strings.Compare(a, b)
		})
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %d", k, m[k])
		}
		return strings.Join(parts, ", ")
	}
	s := list(outcomes)
	if len(errs) > 0 {
		s += "; errors: " + list(errs)
	}
	return s
}

func printSummary(out *output, res *HTTPResult) {
	for _, t := range res.Targets {
		line := "  " + t.Name + ":"
		if res.Mode == "open" && len(res.Rates) > 1 {
			if t.MaxRateP99OK > 0 {
				line += fmt.Sprintf(" p99 ≤ %g ms up to %g/s", res.P99MaxMS, t.MaxRateP99OK)
			} else {
				line += fmt.Sprintf(" p99 > %g ms (or failures > 0.1 %%) from the lowest rate", res.P99MaxMS)
			}
			if t.MaxRateVsFloor2 > 0 {
				line += fmt.Sprintf(" (%.2f× floor2's)", t.MaxRateVsFloor2)
			}
			if res.Repeat > 1 {
				line += fmt.Sprintf(" by the median of %d rounds, in every round up to %g/s", res.Repeat, t.MaxRateEveryRound)
				if t.MaxRateEveryRoundVsFloor2 > 0 {
					line += fmt.Sprintf(" (%.2f× floor2's)", t.MaxRateEveryRoundVsFloor2)
				}
			}
			line += ";"
		}
		for _, s := range t.Steps {
			if s.P99VsFloor2 > 0 {
				line += fmt.Sprintf(" p99 %.2f× floor2's at %s;", s.P99VsFloor2, rateLabel(s))
			}
			if s.Workers > 0 && s.ThroughputVsFloor2 > 0 {
				line += fmt.Sprintf(" answers/s %.2f× floor2's;", s.ThroughputVsFloor2)
			}
		}
		if strings.HasSuffix(line, ":") {
			continue
		}
		out.printf("%s\n", strings.TrimSuffix(line, ";"))
	}
}

func rateLabel(s StepResult) string {
	if s.Workers > 0 {
		return fmt.Sprintf("%d workers", s.Workers)
	}
	return strconv.FormatFloat(s.Rate, 'f', -1, 64) + "/s"
}

// loadAverage is /proc/loadavg's first three fields ("" elsewhere): figures from a busy
// machine say so.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
