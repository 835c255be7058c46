package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/bench"
	"github.com/surgekit/surge/internal/testenv"
)

// The stall every schedule test meets: the server answers nothing between stallAfter and
// stallAfter+stallFor after its first request (a GC pause, a frozen Redis), then everything.
const (
	stallAfter = 300 * time.Millisecond
	stallFor   = 500 * time.Millisecond
)

// stall is a test server that stalls once; from and until are set by its first request.
type stall struct {
	*httptest.Server
	mu          sync.Mutex
	from, until time.Time
}

// stallServer answers 200 at once, except that requests arriving during the stall are held
// until it ends.
func stallServer(t *testing.T) *stall {
	s := &stall{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		s.mu.Lock()
		if s.from.IsZero() {
			s.from = now.Add(stallAfter)
			s.until = s.from.Add(stallFor)
		}
		from, until := s.from, s.until
		s.mu.Unlock()
		if now.After(from) && now.Before(until) {
			time.Sleep(until.Sub(now))
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

// window is the stall as offsets from a loop's start.
func (s *stall) window(start time.Time) (from, until time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from.Sub(start), s.until.Sub(start)
}

// getter is a shooter that GETs url: "admitted" for a 200, an error kind otherwise.
func getter(url string) func(ctx context.Context, i int) string {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	return func(ctx context.Context, _ int) string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "transport"
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return "http"
		}
		return "admitted"
	}
}

// The open loop keeps its schedule through a 500 ms stall and measures each request from when
// it was due: every request due during the stall carries the rest of the stall, so p99 and max
// show it. A closed loop against the same stall stops sending: each worker has one request
// stuck in the stall and sends nothing else until it ends, so the stall is one request per
// worker and stays out of its p99 (coordinated omission). Written for a busy machine: a
// starved process only makes latencies longer, and requests it could not send in time are
// counted as not sent, never lost.
func TestOpenLoopShowsStall(t *testing.T) {
	ctx := context.Background()
	srv := stallServer(t)
	open := bench.OpenLoop(ctx, 1000, 0, 1500*time.Millisecond, 1000, getter(srv.URL))
	from, until := srv.window(open.Start)
	t.Logf("open loop: %d sent, %d not sent, no slot %d, p50 %v p99 %v max %v; stall %v-%v", len(open.Shots), open.NotSent,
		open.NoSlot, open.P50, open.P99, open.Max, from, until)
	if open.Scheduled != 1500 || len(open.Shots)+open.NotSent != 1500 {
		t.Fatalf("scheduled %d, sent %d, not sent %d: want 1500 = sent + not sent", open.Scheduled, len(open.Shots), open.NotSent)
	}
	inStall := 0
	for _, s := range open.Shots {
		if s.Class != "admitted" {
			t.Fatalf("request due at %v: %s", s.Due, s.Class)
		}
		// Due during the stall: answered at its end at the earliest, and counted so.
		if s.Due > from && s.Due < until {
			inStall++
			if s.Latency < until-s.Due-time.Millisecond {
				t.Errorf("request due at %v during the stall: latency %v, want ≥ %v (the rest of the stall)", s.Due, s.Latency, until-s.Due)
			}
		}
	}
	if inStall < 400 || open.P99 < 400*time.Millisecond || open.Max < 450*time.Millisecond {
		t.Errorf("open loop: %d requests due during the stall, p99 %v, max %v: want ≈ 500, ≥ 400 ms, ≥ 450 ms", inStall, open.P99, open.Max)
	}

	// Two workers. Sends between 10 ms after the stall began and its end: at most one per
	// worker (a request sent just before it began can be answered just after).
	srv = stallServer(t)
	closed := bench.OpenLoop(ctx, 0, 2, 2*time.Second, 0, getter(srv.URL))
	from, until = srv.window(closed.Start)
	sentInStall, held := 0, 0
	for _, s := range closed.Shots {
		if s.Due > from+10*time.Millisecond && s.Due < until {
			sentInStall++
		}
		if s.Due < until && s.Due+s.Latency > until-10*time.Millisecond {
			held++ // in flight when the stall ended
		}
	}
	t.Logf("closed loop, 2 workers: %d sent, %d sent during the stall, %d held by it; p50 %v p99 %v max %v", len(closed.Shots),
		sentInStall, held, closed.P50, closed.P99, closed.Max)
	if sentInStall > 2 || held > 2 || closed.Max < 450*time.Millisecond || closed.P99 >= open.P99 || len(closed.Shots) < 300 {
		t.Errorf("closed loop: %d sent during the stall, %d held, max %v, p99 %v (open loop's %v), %d sent: want ≤ 2, ≤ 2, ≥ 450 ms, below the open loop's, ≥ 300",
			sentInStall, held, closed.Max, closed.P99, open.P99, len(closed.Shots))
	}
}

// With few requests allowed in flight the stall fills them all: the requests due meanwhile
// find no free slot, go out late when the stall ends, and are counted so, yet their latency
// still counts from when they were due. The bound is never exceeded.
func TestOpenLoopInFlightBound(t *testing.T) {
	srv := stallServer(t)
	run := bench.OpenLoop(context.Background(), 1000, 0, 1500*time.Millisecond, 20, getter(srv.URL))
	from, until := srv.window(run.Start)
	late, dueInStall := 0, 0
	for _, s := range run.Shots {
		if s.Lag > time.Millisecond {
			late++
		}
		if s.Due > from+50*time.Millisecond && s.Due < until {
			dueInStall++
			if s.Latency < until-s.Due-time.Millisecond {
				t.Errorf("request due at %v during the stall: latency %v, want ≥ %v (its wait for a slot included)", s.Due, s.Latency, until-s.Due)
			}
		}
	}
	t.Logf("bound 20: %d sent, %d not sent, no slot %d, late %d, most in flight %d, p99 %v max %v", len(run.Shots), run.NotSent,
		run.NoSlot, late, run.MostInFlight, run.P99, run.Max)
	// Sent late once the stall ends, unless this process is too short of CPU to catch up
	// before the step's end (+ grace): those are counted as not sent, never lost.
	if run.Scheduled != 1500 || len(run.Shots)+run.NotSent != 1500 {
		t.Errorf("scheduled %d, sent %d, not sent %d: want 1500 = sent + not sent", run.Scheduled, len(run.Shots), run.NotSent)
	}
	if run.MostInFlight > 20 {
		t.Errorf("%d in flight at once, bound 20", run.MostInFlight)
	}
	// ≈ 450 are due in the stall after the 20 slots filled.
	if dueInStall < 300 || run.NoSlot < 300 || late < 300 {
		t.Errorf("%d sent of those due in the stall, no slot %d, late %d: want ≥ 300 each", dueInStall, run.NoSlot, late)
	}
	if run.P99 < 400*time.Millisecond || run.Max < 450*time.Millisecond {
		t.Errorf("p99 %v, max %v: the wait for a slot must count (≥ 400 ms, ≥ 450 ms)", run.P99, run.Max)
	}
}

// The command against a real server (app.New's handler on real Redis and MariaDB, dev mode)
// and the two floors on the same Redis, a two-rate sweep: each user admitted once in the
// warm-up; then every target gets every request it was due, at the rate offered (±20 %), each
// answered ALREADY_PURCHASED (floor0: its fixed answer), no errors; ratios to floor2, the sweep's verdict and the SVG are there,
// its legend naming the server by the name it was given (-target surge=URL) and the p99 bound
// right of the plot, off the curves; the floors' keys and the users' login keys are gone afterwards.
func TestHTTPBench(t *testing.T) {
	clearSurgeEnv(t)
	rdb := testenv.Redis(t)
	dsn, pfx, admin := testenv.MySQL(t), namespace(t, rdb), testenv.Phone()
	a := devApp(t, []string{testenv.RedisAddr()}, dsn, pfx, admin)
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	svg := filepath.Join(t.TempDir(), "curve.svg")
	const users = 100
	err, res, _ := runErr(t, "http", "-target", "surge="+srv.URL, "-floors", "-redis-addrs", testenv.RedisAddr(), "-namespace", pfx,
		"-admin-phone", admin, "-users", fmt.Sprint(users), "-rates", "50,150", "-duration", "1500ms", "-max-in-flight", "200",
		"-p99-max", "5s", "-svg", svg)
	if err != nil {
		t.Fatal(err)
	}
	targets := res["targets"].([]any)
	if len(targets) != 3 {
		t.Fatalf("%d targets, want floor0, floor2 and the server", len(targets))
	}
	if u := targets[2].(map[string]any)["url"]; u != srv.URL+"/query" {
		t.Fatalf("the server's URL is %v, want %s/query", u, srv.URL)
	}
	for i, want := range []string{"floor0", "floor2", "surge"} {
		tg := targets[i].(map[string]any)
		if tg["name"] != want {
			t.Fatalf("target %d is %v, want %s", i, tg["name"], want)
		}
		// The warm-up: each user's first grab, admitted (stock = users).
		if w := sub(t, sub(t, tg, "warmup"), "outcomes"); num(t, w, "admitted") != users || len(w) != 1 {
			t.Errorf("%s: warm-up answered %v, want %d admitted", want, w, users)
		}
		for j, s := range tg["steps"].([]any) {
			st := s.(map[string]any)
			rate := []float64{50, 150}[j] // low: under -race, beside other packages' tests, 300/s saturated the server
			sent := num(t, st, "sent")
			if num(t, st, "rate") != rate || num(t, st, "scheduled") != rate*1.5 || sent != rate*1.5 || num(t, st, "not_sent") != 0 {
				t.Errorf("%s at %v/s: %v", want, rate, st)
			}
			// The schedule held: requests went out at the rate offered, late only by the lag
			// the step reports (a stall of the machine delays the sender too, and the open
			// loop counts each request's latency from its due time). Answers per second (to
			// the last answer) only roughly: one slow last answer on a busy machine stretches
			// the step.
			lag := num(t, st, "max_send_lag_ms") / 1000
			if sr := num(t, st, "sent_rps"); sr < 0.8*sent/(1.5+lag) || sr > 1.2*rate {
				t.Errorf("%s at %v/s: sent at %v/s with a send lag of %.3f s, want within 20 %% of the rate over 1.5 s + the lag", want, rate, sr, lag)
			}
			if lat, fromSend := sub(t, st, "latency_ms"), sub(t, st, "latency_from_send_ms"); num(t, lat, "max") < num(t, fromSend, "max") {
				t.Errorf("%s at %v/s: latency from the due time %v below latency from the send %v", want, rate, lat, fromSend)
			}
			if thr := num(t, st, "throughput_rps"); thr < 0.5*rate || thr > 1.2*rate {
				t.Errorf("%s at %v/s: %v answers/s, want 0.5-1.2× the rate", want, rate, thr)
			}
			lat := sub(t, st, "latency_ms")
			if num(t, lat, "p50") <= 0 || num(t, lat, "p99") < num(t, lat, "p50") || num(t, lat, "max") < num(t, lat, "p99_9") || num(t, lat, "n") != sent {
				t.Errorf("%s at %v/s: latency %v", want, rate, lat)
			}
			if errs := sub(t, st, "errors"); len(errs) != 0 {
				t.Errorf("%s at %v/s: errors %v", want, rate, errs)
			}
			// Every user holds an order now: ALREADY_PURCHASED, except from floor0's fixed answer.
			oc, wantOutcome := sub(t, st, "outcomes"), "already_purchased"
			if want == "floor0" {
				wantOutcome = "admitted"
			}
			if len(oc) != 1 || num(t, oc, wantOutcome) != sent {
				t.Errorf("%s at %v/s: outcomes %v, want %v %s", want, rate, oc, sent, wantOutcome)
			}
			if i == 2 && st["p99_vs_floor2"] == nil {
				t.Errorf("%s at %v/s: no p99 ratio to floor2", want, rate)
			}
		}
		if num(t, tg, "max_rate_p99_ok") != 150 {
			t.Errorf("%s: max_rate_p99_ok %v, want 150 (p99 bound 5 s)", want, tg["max_rate_p99_ok"])
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) || bytes.Count(b, []byte("<polyline")) != 6 {
		t.Errorf("SVG %s (%v): %.300s", svg, err, b)
	}
	for _, label := range []string{"floor0", "floor2", "surge", "p99 bound 5000 ms"} {
		m := regexp.MustCompile(`<text x="([0-9.]+)"[^>]*>` + regexp.QuoteMeta(label) + `</text>`).FindSubmatch(b)
		if m == nil {
			t.Errorf("the SVG's legend has no %q", label)
		} else if x, _ := strconv.ParseFloat(string(m[1]), 64); x < 570 { // the plot ends at x = 570
			t.Errorf("the SVG's label %q is at x = %v, on the plot", label, x)
		}
	}
	// Clean-up: floor2's keys, and the server's users' login keys.
	noKeysLeft(t, rdb, "bench-floor-"+res["run"].(string)+":*")
	ph := targets[2].(map[string]any)["phone_prefix"].(string)
	ctx := context.Background()
	for i := range users {
		for _, k := range auth.KeysIn(pfx).Phone(fmt.Sprintf("%s%06d", ph, i)) {
			if rdb.Exists(ctx, k).Val() == 1 {
				t.Errorf("login key %s left behind", k)
			}
		}
	}
}

// -floors-process: the floors served by a child process (the test binary re-executed, see
// TestMain), answering every request on the sale and sessions the parent made, which the
// parent deletes after.
func TestHTTPFloorsProcess(t *testing.T) {
	clearSurgeEnv(t)
	rdb := testenv.Redis(t)
	err, res, _ := runErr(t, "http", "-floors", "-floors-process", "-redis-addrs", testenv.RedisAddr(), "-users", "50",
		"-rate", "200", "-duration", "1s")
	if err != nil {
		t.Fatal(err)
	}
	if res["floors"] != "process" {
		t.Errorf("floors %v, want process", res["floors"])
	}
	for i, tg := range res["targets"].([]any) {
		st := tg.(map[string]any)["steps"].([]any)[0].(map[string]any)
		want := []string{"admitted", "already_purchased"}[i] // floor0's fixed answer; floor2 after the warm-up
		if oc := sub(t, st, "outcomes"); num(t, st, "sent") != 200 || num(t, oc, want) != 200 || len(sub(t, st, "errors")) != 0 {
			t.Errorf("floor%d: %v", 2*i, st)
		}
	}
	noKeysLeft(t, rdb, "bench-floor-"+res["run"].(string)+":*")
}

// -repeat 3: every step runs three rounds, interleaved across the targets; a step's figures
// are its median round's (by p99), all three rounds are kept, and the step holds the bound
// when most rounds do. With a bound no round can hold, no rate holds.
func TestHTTPRepeat(t *testing.T) {
	clearSurgeEnv(t)
	rdb := testenv.Redis(t)
	for _, bound := range []string{"5s", "10us"} {
		err, res, _ := runErr(t, "http", "-floors", "-redis-addrs", testenv.RedisAddr(), "-users", "50",
			"-rates", "100,200", "-repeat", "3", "-duration", "500ms", "-p99-max", bound)
		if err != nil {
			t.Fatal(err)
		}
		noKeysLeft(t, rdb, "bench-floor-"+res["run"].(string)+":*")
		if num(t, res, "repeat") != 3 {
			t.Errorf("repeat %v, want 3", res["repeat"])
		}
		for _, tg := range res["targets"].([]any) {
			tgt := tg.(map[string]any)
			steps := tgt["steps"].([]any)
			if len(steps) != 2 {
				t.Fatalf("%s: %d steps, want one per rate", tgt["name"], len(steps))
			}
			for j, s := range steps {
				st := s.(map[string]any)
				rate := []float64{100, 200}[j]
				rounds := st["rounds"].([]any)
				if len(rounds) != 3 {
					t.Fatalf("%s at %v/s: %d rounds, want 3", tgt["name"], rate, len(rounds))
				}
				var p99s []float64
				for k, r := range rounds {
					rd := r.(map[string]any)
					if num(t, rd, "round") != float64(k+1) || num(t, rd, "rate") != rate || num(t, rd, "sent") != rate/2 {
						t.Errorf("%s at %v/s, round %d: %v", tgt["name"], rate, k+1, rd)
					}
					p99s = append(p99s, num(t, sub(t, rd, "latency_ms"), "p99"))
				}
				slices.Sort(p99s)
				if p := num(t, sub(t, st, "latency_ms"), "p99"); p != p99s[1] {
					t.Errorf("%s at %v/s: p99 %v, want the median round's %v (rounds %v)", tgt["name"], rate, p, p99s[1], p99s)
				}
				held := 3.0
				if bound == "10us" {
					held = 0
				}
				if got, _ := st["rounds_held"].(float64); got != held {
					t.Errorf("%s at %v/s, bound %s: %v rounds held, want %v", tgt["name"], rate, bound, got, held)
				}
			}
			wantMax := 200.0
			if bound == "10us" {
				wantMax = 0
			}
			got, _ := tgt["max_rate_p99_ok"].(float64)
			every, _ := tgt["max_rate_p99_ok_every_round"].(float64)
			if got != wantMax || every != wantMax {
				t.Errorf("%s, bound %s: max rate %v, every round %v; want %v", tgt["name"], bound, got, every, wantMax)
			}
		}
	}
}

func TestHTTPUsage(t *testing.T) {
	clearSurgeEnv(t)
	for _, args := range [][]string{
		{"http"},                       // no target, no floors
		{"http", "-floors"},            // floors without a real Redis
		{"http", "-target", "ftp://x"}, // not http
		{"http", "-target", "http://127.0.0.1:1", "-closed", "10", "-rate", "100"}, // closed with a rate
		{"http", "-target", "http://127.0.0.1:1", "-rates", "100,x"},
		{"http", "-target", "http://127.0.0.1:1", "-rate", "300000", "-duration", "10s"}, // too many requests in one step
		{"http", "-target", "http://127.0.0.1:1", "-max-in-flight", "0"},
		{"http", "-target", "http://127.0.0.1:1", "-floors-process"}, // without -floors
		{"http", "-target", "http://127.0.0.1:1", "-repeat", "0"},
	} {
		var out, errb bytes.Buffer
		if err := bench.Run(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%v accepted", args)
		} else if !strings.Contains(err.Error(), "bench http") {
			t.Errorf("%v: %v, want an error naming bench http", args, err)
		}
	}
}
