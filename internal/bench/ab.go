package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/commalist"
)

const abHelp = `surge bench ab: the headline ratios of two builds, side by side and interleaved.

  SURGE_REDIS_ADDRS=127.0.0.1:6379 SURGE_MYSQL_DSN='user:pass@tcp(127.0.0.1:3306)/surge' \
    surge bench ab [-rounds 3] [-only admission,drain,grabs] REF

Run it inside the repository (or give -repo). It builds REF (a commit, tag or branch, taken
with git archive) and the work tree as it is, uncommitted changes included, each with
go build -trimpath into a temporary directory. If either does not build it stops there, with
the compiler's output, before anything runs. Then each build measures itself with its own
binary:

  admission  bench seckill -inprocess -users U -sales S, consumer running: grabs/s ÷
             redis-benchmark running the same script in the same run, the median of the
             S sales (a sale's grabs last a few tenths of a second)
  drain      bench drain -orders N: the consumer's rows/s ÷ raw 500-row INSERTs of the same
             rows (steady state: first batch persisted to the last), and its rows/s counted
             from the consumer's start ÷ that steady state (what the start costs)
  grabs      one surge serve per build (dev mode, consumer on, no rate limit, a namespace of
             its own), and bench http of the work tree against both with -floors-process: a
             closed loop of -closed workers (answers/s ÷ floor2's) and an open loop at -rate
             (p99 ÷ floor2's), -rounds rounds each, interleaved target by target

admission and drain run round by round, the builds' order swapped every round (REF first in
odd rounds). For each figure it prints every round, the median of each build and
work tree ÷ REF, with the load average before and after (a busy machine moves every figure:
compare builds only within one run). The last stdout line is one JSON object.

It runs in a database of its own (the DSN's database name + _ab_<run>, created and dropped:
the DSN's user needs CREATE and DROP there) and under namespaces ab-<run>-…, whose Redis keys
are deleted at the end, also after a failure or an interrupt. It needs git, go and (for
admission) redis-benchmark on PATH. The first run compiles every dependency with -trimpath
(minutes); later runs reuse Go's build cache.
`

// ABResult is the final JSON line of the ab scenario.
type ABResult struct {
	Scenario   string     `json:"scenario"`
	Ref        string     `json:"ref"`
	RefCommit  string     `json:"ref_commit"`
	WorkTree   string     `json:"work_tree"` // HEAD's commit, "+changes" if the tree differs from it
	Rounds     int        `json:"rounds"`
	Figures    []ABFigure `json:"figures"`
	LoadBefore string     `json:"load_average_before"`
	LoadAfter  string     `json:"load_average_after"`
	BuildMS    float64    `json:"build_ms"`
	// PhaseMS is how long each phase took, both builds and every round.
	PhaseMS   map[string]float64 `json:"phase_ms"`
	ElapsedMS float64            `json:"elapsed_ms"`
}

// ABFigure is one figure of both builds: each round's value, the medians and their ratio.
type ABFigure struct {
	Name        string    `json:"name"`
	Better      string    `json:"better"` // "higher" or "lower"
	Ref         []float64 `json:"ref"`
	WorkTree    []float64 `json:"work_tree"`
	RefMedian   float64   `json:"ref_median"`
	WorkMedian  float64   `json:"work_tree_median"`
	WorkOverRef float64   `json:"work_tree_over_ref"`
}

type abOpts struct {
	rounds, users, sales, baselineN, orders, closed, httpUsers int
	rate                                                       float64
	duration, timeout                                          time.Duration
	repo                                                       string
	phases                                                     map[string]bool
}

// abPhases are the phases -only chooses from, in the order they run.
var abPhases = []string{"admission", "drain", "grabs"}

// abBuild is one of the two builds.
type abBuild struct {
	name string // "ref" or "work"
	bin  string
}

// abRun is one run of the scenario.
type abRun struct {
	o        abOpts
	cfg      app.Config
	run      string
	tmp      string
	dsn      string // the run's database
	builds   [2]abBuild
	out      *output
	figures  map[string]*ABFigure
	order    []string // figure names in the order first met
	children int      // child runs so far (their logs are numbered)
}

func runAB(ctx context.Context, args []string, out *output) error {
	o, cfg, ref, err := abFlags(args, out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	began := time.Now()
	ab := &abRun{o: o, cfg: cfg, run: runID(), out: out, figures: map[string]*ABFigure{}}
	res := ABResult{Scenario: "ab", Ref: ref, Rounds: o.rounds, LoadBefore: loadAverage(), PhaseMS: map[string]float64{}}
	if ab.tmp, err = os.MkdirTemp("", "surge-ab-"); err != nil {
		return err
	}
	keepLogs := true
	defer func() {
		if keepLogs {
			for _, b := range ab.builds {
				_ = os.Remove(b.bin)
			}
			_ = os.RemoveAll(filepath.Join(ab.tmp, "ref"))
			if os.Remove(ab.tmp) != nil { // not empty: a run's logs are there
				out.printf("  logs of the runs: %s\n", ab.tmp)
			}
			return
		}
		_ = os.RemoveAll(ab.tmp)
	}()
	if res.RefCommit, res.WorkTree, err = ab.build(ctx, ref); err != nil {
		return err
	}
	res.BuildMS = ms(time.Since(began))
	out.printf("ab: REF %s (%s) against the work tree (%s), %d rounds; built in %.0f s; load average %s\n",
		ref, short(res.RefCommit), res.WorkTree, o.rounds, res.BuildMS/1000, res.LoadBefore)
	cleanup, err := ab.openDatabase(ctx)
	if err != nil {
		return err
	}
	var once sync.Once
	defer once.Do(cleanup)
	for _, phase := range abPhases {
		if !o.phases[phase] {
			continue
		}
		var err error
		started := time.Now()
		switch phase {
		case "admission":
			err = ab.rounds(ctx, ab.admission)
		case "drain":
			err = ab.rounds(ctx, ab.drain)
		case "grabs":
			err = ab.grabs(ctx)
		}
		if err != nil {
			return err
		}
		res.PhaseMS[phase] = ms(time.Since(started))
		out.printf("  %s: %.0f s (load average %s)\n", phase, res.PhaseMS[phase]/1000, loadAverage())
	}
	res.LoadAfter = loadAverage()
	for _, name := range ab.order {
		f := ab.figures[name]
		f.RefMedian, f.WorkMedian = median(f.Ref), median(f.WorkTree)
		if f.RefMedian != 0 {
			f.WorkOverRef = round3(f.WorkMedian / f.RefMedian)
		}
		res.Figures = append(res.Figures, *f)
	}
	once.Do(cleanup)
	ab.print(res)
	res.ElapsedMS = ms(time.Since(began))
	keepLogs = false
	return out.json(res)
}

// abFlags parses the flags and the REF argument.
func abFlags(args []string, out *output) (abOpts, app.Config, string, error) {
	fs := flag.NewFlagSet("surge bench ab", flag.ContinueOnError)
	fs.SetOutput(out.errw)
	fs.Usage = func() { fmt.Fprint(out.errw, abHelp, "\nFlags:\n"); fs.PrintDefaults() }
	build := app.ConfigFlags(fs, nil)
	var o abOpts
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of each figure, per build")
	only := fs.String("only", strings.Join(abPhases, ","), "phases to run, comma-separated: admission, drain, grabs")
	fs.StringVar(&o.repo, "repo", "", "the work tree to build (default: the git work tree of the current directory)")
	fs.IntVar(&o.users, "users", 20_000, "admission: users (each grabs once; bench seckill -users)")
	fs.IntVar(&o.sales, "sales", 3, "admission: sales per round, each with its own baselines; a round's figure is their median (bench seckill -sales)")
	fs.IntVar(&o.baselineN, "baseline-n", 100_000, "admission: requests of each redis-benchmark run (bench seckill -baseline-n)")
	fs.IntVar(&o.orders, "orders", 200_000, "drain: orders queued then drained (bench drain -orders)")
	fs.IntVar(&o.closed, "closed", 200, "grabs: workers of the closed loop")
	fs.Float64Var(&o.rate, "rate", 2000, "grabs: requests per second of the open loop")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "grabs: length of each step")
	fs.IntVar(&o.httpUsers, "http-users", 2000, "grabs: users per target (bench http -users)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	jsonOnly := fs.Bool("json-only", false, "print only the final JSON line")
	if err := fs.Parse(args); err != nil {
		return o, app.Config{}, "", err
	}
	out.jsonOnly = *jsonOnly
	cfg, err := build()
	if err != nil {
		return o, cfg, "", err
	}
	o.phases = map[string]bool{}
	for _, p := range commalist.Split(*only) {
		if !slices.Contains(abPhases, p) {
			return o, cfg, "", fmt.Errorf("bench ab: unknown phase %q in -only (want %s)", p, strings.Join(abPhases, ", "))
		}
		o.phases[p] = true
	}
	switch {
	case fs.NArg() != 1:
		fs.Usage()
		return o, cfg, "", errors.New("bench ab: name one REF to compare the work tree with (e.g. main, a commit)")
	case o.rounds < 1 || o.rounds > 20:
		return o, cfg, "", errors.New("bench ab: -rounds in [1, 20]")
	case len(cfg.RedisAddrs) == 0 || cfg.MySQLDSN == "":
		return o, cfg, "", errors.New("bench ab: needs a real Redis and MySQL (SURGE_REDIS_ADDRS and SURGE_MYSQL_DSN, or -redis-addrs and -mysql-dsn)")
	case o.sales < 1 || o.sales > 20:
		return o, cfg, "", errors.New("bench ab: -sales in [1, 20]")
	case o.users < 1 || o.orders < 1 || o.closed < 1 || o.rate <= 0 || o.httpUsers < 1 || o.duration <= 0:
		return o, cfg, "", errors.New("bench ab: -users, -orders, -closed, -rate, -http-users and -duration must be positive")
	}
	need := []string{"git", "go"}
	if o.phases["admission"] {
		need = append(need, "redis-benchmark")
	}
	for _, tool := range need {
		if _, err := exec.LookPath(tool); err != nil {
			return o, cfg, "", fmt.Errorf("bench ab: %s is not on PATH", tool)
		}
	}
	return o, cfg, fs.Arg(0), nil
}

// rounds runs measure for both builds, round by round, REF first in odd rounds.
func (ab *abRun) rounds(ctx context.Context, measure func(ctx context.Context, b abBuild, round int) error) error {
	for r := 1; r <= ab.o.rounds; r++ {
		builds := ab.builds
		if r%2 == 0 {
			builds[0], builds[1] = builds[1], builds[0]
		}
		for _, b := range builds {
			if err := measure(ctx, b, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// admission is one bench seckill -inprocess run.
func (ab *abRun) admission(ctx context.Context, b abBuild, round int) error {
	var r SeckillResult
	err := ab.child(ctx, b, fmt.Sprintf("admission-%d", round), &r, "bench", "seckill", "-inprocess",
		"-users", strconv.Itoa(ab.o.users), "-sales", strconv.Itoa(ab.o.sales), "-baseline-n", strconv.Itoa(ab.o.baselineN), "-json-only")
	if err != nil {
		return err
	}
	ratio := r.Ratio
	if ab.o.sales > 1 {
		ratio = r.RatioMedian // a grab phase of 20 000 users lasts a few tenths of a second
	}
	if ratio <= 0 {
		return fmt.Errorf("bench ab: %s's bench seckill gave no ratio to redis-benchmark", b.name)
	}
	ab.note(b, "admission: grabs/s ÷ redis-benchmark", "higher", ratio)
	ab.out.printf("  round %d %s admission %.3f× redis-benchmark (median of %d sales; the last %.0f grabs/s)\n", round, b.name, ratio, ab.o.sales, r.ThroughputRPS)
	return nil
}

// drain is one bench drain run.
func (ab *abRun) drain(ctx context.Context, b abBuild, round int) error {
	var r DrainResult
	err := ab.child(ctx, b, fmt.Sprintf("drain-%d", round), &r, "bench", "drain", "-orders", strconv.Itoa(ab.o.orders), "-json-only")
	if err != nil {
		return err
	}
	if r.OursRowsPerS <= 0 || r.RawRowsPerS <= 0 {
		return fmt.Errorf("bench ab: %s's bench drain gave no rates", b.name)
	}
	fromStart := r.OursFromStartRPS / r.OursRowsPerS
	ab.note(b, "drain: steady rows/s ÷ raw INSERT", "higher", r.Ratio)
	ab.note(b, "drain: rows/s from start ÷ steady", "higher", round3(fromStart))
	ab.out.printf("  round %d %s drain %.0f rows/s steady (%.3f× raw %.0f), %.0f from the start (%.3f× steady)\n",
		round, b.name, r.OursRowsPerS, r.Ratio, r.RawRowsPerS, r.OursFromStartRPS, fromStart)
	return nil
}

// grabs starts a server per build and runs bench http against both and the floors: a closed
// loop, then an open loop at a fixed rate, each with its own servers (a fresh namespace: the
// admin's login cooldown and the first run's sessions stay behind).
func (ab *abRun) grabs(ctx context.Context) error {
	modes := []struct {
		name string
		args []string
	}{
		{"closed", []string{"-closed", strconv.Itoa(ab.o.closed)}},
		{"open", []string{"-rate", strconv.FormatFloat(ab.o.rate, 'f', -1, 64)}},
	}
	for _, m := range modes {
		var urls [2]string
		var stops []func()
		stopAll := func() {
			for _, s := range stops {
				s()
			}
		}
		for i, b := range ab.builds {
			srv, err := ab.serve(ctx, b, m.name, i == 0)
			if err != nil {
				stopAll()
				return err
			}
			stops = append(stops, srv.stop)
			urls[i] = srv.base
		}
		var r HTTPResult
		args := append([]string{"bench", "http", "-target", urls[0] + "," + urls[1], "-floors", "-floors-process",
			"-duration", ab.o.duration.String(), "-repeat", strconv.Itoa(ab.o.rounds), "-users", strconv.Itoa(ab.o.httpUsers),
			"-json-only"}, m.args...)
		err := ab.child(ctx, abBuild{name: "work", bin: ab.builds[1].bin}, "grabs-"+m.name, &r, args...)
		stopAll()
		if err != nil {
			return err
		}
		if err := ab.noteGrabs(m.name, r); err != nil {
			return err
		}
	}
	return nil
}

// noteGrabs takes each round's figures of both servers against floor2's from a bench http
// result (targets in the order ref, work).
func (ab *abRun) noteGrabs(mode string, r HTTPResult) error {
	rounds := func(kind string, i int) []StepResult {
		n := 0
		for _, t := range r.Targets {
			if t.Kind != kind {
				continue
			}
			if n == i && len(t.Steps) == 1 {
				if len(t.Steps[0].Rounds) > 0 {
					return t.Steps[0].Rounds
				}
				return t.Steps
			}
			n++
		}
		return nil
	}
	floor2 := rounds("floor2", 0)
	for i, b := range ab.builds {
		ours := rounds("target", i)
		if len(ours) == 0 || len(ours) != len(floor2) {
			return fmt.Errorf("bench ab: bench http gave %d rounds for %s and %d for floor2", len(ours), b.name, len(floor2))
		}
		for j, s := range ours {
			f := floor2[j]
			switch mode {
			case "closed":
				if f.ThroughputRPS > 0 {
					ab.note(b, fmt.Sprintf("grabs: answers/s ÷ floor2's (closed loop, %d workers)", ab.o.closed), "higher", round3(s.ThroughputRPS/f.ThroughputRPS))
				}
			default:
				if f.Latency.P99 > 0 {
					ab.note(b, fmt.Sprintf("grabs: p99 ÷ floor2's (open loop, %g/s)", ab.o.rate), "lower", round3(s.Latency.P99/f.Latency.P99))
				}
			}
		}
		ab.out.printf("  grabs %s %s: %s\n", mode, b.name, stepSummary(ours, floor2))
	}
	return nil
}

// stepSummary lists each round's answers/s and p99 next to floor2's.
func stepSummary(ours, floor2 []StepResult) string {
	var parts []string
	for j, s := range ours {
		parts = append(parts, fmt.Sprintf("%.0f/s p99 %.1f ms (floor2 %.0f/s %.1f ms)", s.ThroughputRPS, s.Latency.P99, floor2[j].ThroughputRPS, floor2[j].Latency.P99))
	}
	return strings.Join(parts, "; ")
}

// note records one round's value of a figure for a build.
func (ab *abRun) note(b abBuild, name, better string, v float64) {
	f := ab.figures[name]
	if f == nil {
		f = &ABFigure{Name: name, Better: better}
		ab.figures[name] = f
		ab.order = append(ab.order, name)
	}
	if b.name == "ref" {
		f.Ref = append(f.Ref, v)
	} else {
		f.WorkTree = append(f.WorkTree, v)
	}
}

// print writes the table of medians.
func (ab *abRun) print(res ABResult) {
	ab.out.printf("\n%-58s %22s %22s %10s\n", "figure (median of rounds)", "REF "+short(res.RefCommit), "work tree", "work/REF")
	for _, f := range res.Figures {
		ab.out.printf("%-58s %22s %22s %9.3f×  (%s is better)\n", f.Name, fmt.Sprintf("%.3f %s", f.RefMedian, rounds(f.Ref)),
			fmt.Sprintf("%.3f %s", f.WorkMedian, rounds(f.WorkTree)), f.WorkOverRef, f.Better)
	}
	ab.out.printf("load average before %s, after %s\n", res.LoadBefore, res.LoadAfter)
}

func rounds(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// median is the middle value (the mean of the two middle ones for an even count); 0 if none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func short(commit string) string { return commit[:min(len(commit), 7)] }

// namespace is a namespace of this run: every key the run's processes write starts with
// "ab-<run>-", which the clean-up deletes.
func (ab *abRun) namespace(parts ...string) string {
	return "ab-" + ab.run + "-" + strings.Join(parts, "-")
}

// env is the environment of a child: this process's without the settings the run chooses
// itself, plus the run's Redis, database and namespace.
func (ab *abRun) env(ns string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SURGE_REDIS_ADDRS", "SURGE_REDIS_PASSWORD", "SURGE_MYSQL_DSN", "SURGE_NAMESPACE", "SURGE_ADDR",
			"SURGE_ADMIN_ADDR", "SURGE_MODE", "SURGE_TAKE_OVER_NAMESPACE":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "SURGE_REDIS_ADDRS="+strings.Join(ab.cfg.RedisAddrs, ","), "SURGE_REDIS_PASSWORD="+ab.cfg.RedisPassword,
		"SURGE_MYSQL_DSN="+ab.dsn, "SURGE_NAMESPACE="+ns)
}

// child runs one bench of build b under a namespace of its own and decodes its final JSON
// line into v; its stderr goes to a log file of the run.
func (ab *abRun) child(ctx context.Context, b abBuild, what string, v any, args ...string) error {
	ab.children++
	logPath := filepath.Join(ab.tmp, fmt.Sprintf("%02d-%s-%s.log", ab.children, what, b.name))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = ab.env(ab.namespace(b.name, what))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, logf
	// Interrupted, a bench still deletes what it created.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	if runErr != nil {
		return fmt.Errorf("bench ab: %s %s failed: %w\n  last output: %s\n  its log: %s", b.name, strings.Join(args[:2], " "), runErr, last, logPath)
	}
	if err := json.Unmarshal([]byte(last), v); err != nil {
		return fmt.Errorf("bench ab: %s %s printed no JSON result (%q): %w; its log: %s", b.name, strings.Join(args[:2], " "), last, err, logPath)
	}
	return nil
}

// serve starts build b's server: dev mode (login codes come back), its consumer on, no grab
// rate limit, its own namespace, a bounded database pool (two servers and the benches share
// the database's connections). The first seeds the demo data if the database is empty (bench
// http needs a shop for its vouchers); the second starts once it listens. Its log goes to a
// file of the run.
func (ab *abRun) serve(ctx context.Context, b abBuild, what string, seed bool) (*benchServer, error) {
	logPath := filepath.Join(ab.tmp, fmt.Sprintf("serve-%s-%s.log", what, b.name))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "-addr=127.0.0.1:0", "-admin-addr=", "-mode=dev", "-seed=" + strconv.FormatBool(seed), "-seckill-consumer=true",
		"-seckill-rate=-1", "-mysql-max-conns=16"}
	srv, err := startServe(ctx, b.bin, args, ab.env(ab.namespace(b.name, "serve", what)), logf)
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("bench ab: %s's server: %w (%s)", b.name, err, logPath)
	}
	stop := srv.stop
	srv.stop = func() { stop(); _ = logf.Close() }
	return srv, nil
}

// openDatabase creates the run's database next to the DSN's and returns a clean-up that drops
// it and deletes the run's Redis keys.
func (ab *abRun) openDatabase(ctx context.Context) (func(), error) {
	dc, err := mysql.ParseDSN(ab.cfg.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("bench ab: the MySQL DSN: %w", err)
	}
	name := dc.DBName + "_ab_" + ab.run
	db, err := sql.Open("mysql", ab.cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bench ab: creating database %s (the DSN's user needs CREATE and DROP on it): %w", name, err)
	}
	dc.DBName = name
	ab.dsn = dc.FormatDSN()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: ab.cfg.RedisAddrs, Password: ab.cfg.RedisPassword})
	return func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		n, err := deleteKeys(cctx, rdb, "ab-"+ab.run+"-*")
		if err != nil {
			ab.out.printf("  PROBLEM: deleting the run's Redis keys (ab-%s-*): %v\n", ab.run, err)
		} else if n > 0 {
			ab.out.printf("  deleted %d Redis keys of the run\n", n)
		}
		if _, err := db.ExecContext(cctx, "DROP DATABASE `"+name+"`"); err != nil {
			ab.out.printf("  PROBLEM: dropping database %s: %v\n", name, err)
		}
		_ = rdb.Close()
		_ = db.Close()
	}, nil
}
