package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/floor"
	"github.com/surgekit/surge/internal/testenv"
)

// BenchmarkSeckillOverHTTP: the seckillVoucher mutation over real HTTP from 200 concurrent
// clients (100 goroutines per CPU on 2 CPUs), each grab by a distinct logged-in user while
// they last, on real Redis and MariaDB. Compare with the admission script under
// redis-benchmark -c 50 (docs/benchmarks.md).
func BenchmarkSeckillOverHTTP(b *testing.B) {
	vars := map[string]string{
		"SURGE_REDIS_ADDRS":     testenv.RedisAddr(),
		"SURGE_MYSQL_DSN":       testenv.MySQL(b),
		"SURGE_MYSQL_MAX_CONNS": strconv.Itoa(testenv.MySQLConns()),
		"SURGE_MODE":            "dev",
		"SURGE_SEED":            "true",
		"SURGE_SECKILL_RATE":    "-1",
		"SURGE_NAMESPACE":       "bench" + testenv.Phone(),
	}
	cfg, err := app.ParseConfig(nil, func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k) // e.g. SURGE_OTLP_ENDPOINT, SURGE_ACCESS_LOG: what instrumentation costs
	})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The collector as `surge serve` runs it (SURGE_GC_MIN_HEAP_MB; GOGC, if set, decides): for
	// this benchmark only, the floors' run at Go's default, as bare net/http servers do.
	defer app.TuneGC(cfg, log)()
	a, err := app.New(context.Background(), cfg, app.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	// 20 000 sessions and their login keys: gone after the run, not after their TTL.
	testenv.CleanupKeys(b, testenv.Redis(b), vars["SURGE_NAMESPACE"]+":*") // a client open until the cleanups ran
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	ctx := context.Background()
	stock := 100_000_000
	begin, end := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	v, err := a.Catalog.CreateVoucher(ctx, catalog.VoucherInput{ShopID: a.DB.Ent.Shop.Query().FirstIDX(ctx), Title: "bench",
		PayValue: 1, ActualValue: 2, Kind: voucher.KindSECKILL, Stock: &stock, BeginAt: &begin, EndAt: &end})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Seckill.Warm(ctx, v.ID); err != nil {
		b.Fatal(err)
	}
	tokens := make([]string, min(b.N, 20_000))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	base := time.Now().UnixNano() % 100_000
	for i := range tokens {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			phone := fmt.Sprintf("16%04d%05d", base%10_000, i)
			sent, err := a.Auth.SendCode(ctx, phone)
			if err != nil {
				b.Error(err)
				return
			}
			if tokens[i], _, err = a.Auth.Login(ctx, phone, sent.DevCode); err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()
	body := []byte(`{"query":"mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId status } }","variables":{"v":"` + strconv.Itoa(v.ID) + `"}}`)
	postConcurrently(b, srv.URL+"/query", tokens, body)
}

// BenchmarkHTTPFloor is the floor under BenchmarkSeckillOverHTTP (floor0): the same clients and
// requests against a handler that reads the request and writes a fixed seckillVoucher answer
// (floor.Fixed), with no GraphQL, Redis or database behind it. What net/http (server and
// client) costs on this machine.
func BenchmarkHTTPFloor(b *testing.B) {
	srv := httptest.NewServer(floor.Fixed())
	defer srv.Close()
	tokens := make([]string, 20_000)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("token-%043d", i)
	}
	body := []byte(`{"query":"mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId status } }","variables":{"v":"17179869184"}}`)
	postConcurrently(b, srv.URL+"/query", tokens, body)
}

// BenchmarkHTTPFloorRedis is floor2: the same clients and requests as the two above against a
// bare net/http handler doing what a grab must do in Redis (floor.Grab): the session lookup
// internal/auth makes for a token it has not seen (HGETALL of the token's key) and one grab by
// lua/seckill_grab.lua (EVALSHA), unbatched, on a client set up as the server's. Each request
// is another user's session, as in BenchmarkSeckillOverHTTP, and every user's grabs after its
// first are answered ALREADY_PURCHASED, as there. What is left between this and
// BenchmarkSeckillOverHTTP is the server's own work: GraphQL, middleware, batching, the
// order id, the consumer writing orders to MariaDB.
func BenchmarkHTTPFloorRedis(b *testing.B) {
	ctx := context.Background()
	rdb := floor.Client([]string{testenv.RedisAddr()}, "", 0)
	b.Cleanup(func() { _ = rdb.Close() })
	ns := "benchfloor" + testenv.Phone()
	testenv.CleanupKeys(b, rdb, ns+":*") // if Close below did not run (runs before rdb.Close)
	g, err := floor.NewGrab(ctx, rdb, floor.GrabOptions{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = g.Close(ctx) }()
	srv := httptest.NewServer(g)
	defer srv.Close()
	tokens, err := g.Sessions(ctx, min(b.N, 20_000))
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"query":"mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId status } }","variables":{"v":"` + strconv.Itoa(floor.Voucher) + `"}}`)
	postConcurrently(b, srv.URL+"/query", tokens, body)
}

// postConcurrently posts body to url from 200 goroutines (100 per CPU on 2 CPUs), a token per
// request in turn, and fails on any answer but 200 with data or ALREADY_PURCHASED.
func postConcurrently(b *testing.B, url string, tokens []string, body []byte) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 400, MaxConnsPerHost: 400}}
	var next atomic.Int64
	b.SetParallelism(100)
	if f := os.Getenv("BENCH_CPUPROFILE"); f != "" {
		// The measured part only (go test -cpuprofile would include the logins), one file per
		// benchmark (x.prof: x-BenchmarkHTTPFloor.prof…), the last round's.
		ext := filepath.Ext(f)
		out, err := os.Create(strings.TrimSuffix(f, ext) + "-" + b.Name() + ext)
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		_ = pprof.StartCPUProfile(out)
		defer pprof.StopCPUProfile()
	}
	cpuBefore, gcBefore := processCPU(), gcWork()
	b.ResetTimer()
	defer func() {
		b.ReportMetric(float64(processCPU()-cpuBefore)/float64(b.N), "cpu-ns/op")
		gc := gcWork().minus(gcBefore)
		b.ReportMetric(gc.cpuSeconds*1e9/float64(b.N), "gc-cpu-ns/op")
		b.ReportMetric(gc.cycles*1000/float64(b.N), "gc/1k-op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)-1) % len(tokens)
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tokens[i])
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || bytes.Contains(raw, []byte(`"errors"`)) && !bytes.Contains(raw, []byte("ALREADY_PURCHASED")) {
				b.Errorf("%d %s", resp.StatusCode, raw)
				return
			}
		}
	})
}

// gcCost is what the garbage collector has done: the CPU the runtime estimates it used
// (background marking, assists, pauses) and its cycles. Part of where a request's time goes.
type gcCost struct{ cpuSeconds, cycles float64 }

func (c gcCost) minus(o gcCost) gcCost {
	return gcCost{c.cpuSeconds - o.cpuSeconds, c.cycles - o.cycles}
}

func gcWork() gcCost {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return gcCost{s[0].Value.Float64(), float64(s[1].Value.Uint64())}
}

// processCPU is the CPU time this process (server and clients) has used, in nanoseconds: per
// request, a figure other processes on the machine disturb less than wall time.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
