// Package bench implements `surge bench <scenario>`: measurements of the cache, idgen and
// lock packages against a real Redis (a single node, or a Cluster when several addresses are
// given), and the flash-sale load tool.
//
//	cache-stampede     N real processes × M goroutines miss one cold key at once
//	cache-penetration  ids that never existed, read through a Bloom-filtered cache
//	cache-hit          warm-read latency: raw GET+unmarshal vs ours vs our L1
//	idgen              ids/s of one process, plain and segment mode, next to redis-benchmark INCR
//	lock               lock acquire/release rate and pub/sub wake-up latency, uncontended and contended
//	seckill            the flash sale under load, in-process or over HTTP, invariants verified after
//	http               open-loop (constant-rate) grabs against servers and the floors: latency tail and curve
//	drain              the order stream consumer into MySQL next to raw multi-value INSERTs
//	subscriptions      live updates: N order + M stock watchers over graphql-transport-ws, idle cost and latency
//	ab                 two builds side by side (REF and the work tree): the headline ratios, interleaved
//
// seckill and drain take the server's configuration (app.ConfigFlags: SURGE_REDIS_ADDRS,
// SURGE_MYSQL_DSN, SURGE_NAMESPACE, ... and the same flags) instead of -redis-addrs alone.
//
// Every scenario prints a short human summary and, as its last stdout line, one JSON object with
// its figures. It works in keys of its own (a random run id in every key) and deletes them all
// before it returns, also on an error or an interrupt. Every loop is bounded in count and time.
//
// Why the load tool ships inside the server binary rather than as its own command under cmd/:
// an operator who has the server has the tool, at the same version, with nothing else to
// build or copy onto a load host; and seckill and drain read the very configuration the
// server reads (app.ConfigFlags), so a measurement runs against the settings that will serve
// the sale, not a copy that drifts. It costs the binary some size but no start-up time:
// nothing here runs unless `surge bench` is called.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/commalist"
)

// Command runs `surge bench <args>` on the process's stdout/stderr; SIGINT or SIGTERM cancel it
// (scenarios still delete their keys).
func Command(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, os.Stdout, os.Stderr)
}

type scenario struct {
	name, help string
	run        func(ctx context.Context, args []string, out *output) error
	hidden     bool
}

var scenarios = []scenario{
	{name: "cache-stampede", help: "processes × goroutines miss one cold key at once: database loads, waiter latency after the value lands", run: runStampede},
	{name: "cache-penetration", help: "never-existing ids through a Bloom-filtered cache: database loads, Redis keys created", run: runPenetration},
	{name: "cache-hit", help: "warm-read latency: raw GET+json.Unmarshal vs Get/GetOrLoad vs the L1", run: runHit},
	{name: "idgen", help: "ids/s of one process, plain and segment mode, next to redis-benchmark INCR in the same run", run: runIDGen},
	{name: "lock", help: "lock acquire/release per second, uncontended and contended; wake-up latency of handovers between clients", run: runLock},
	{name: "seckill", help: "load test of the flash sale (in-process or over HTTP): throughput, latency, outcomes, invariants verified, vs redis-benchmark", run: runSeckill},
	{name: "sales", help: "many flash sales live at once in one process: per-voucher persistence lag, the consumer's idle Redis commands, connections, goroutines, fds, RSS; every sale verified", run: runSales},
	{name: "http", help: "open-loop constant-rate grabs against any server URL (and the floors): p50/p99/p99.9/max per rate, latency curve, vs vegeta", run: runHTTP},
	{name: "subscriptions", help: "orderStatus + voucherStock watchers over graphql-transport-ws: idle Redis/SQL/CPU/RSS/goroutines, CREATED and stock latency", run: runSubscriptions},
	{name: "drain", help: "order stream consumer into MySQL (rows/s) next to raw 500-row multi-value INSERTs of the same rows", run: runDrain},
	{name: "ab", help: "two builds side by side: builds REF and the work tree, runs admission, drain and grabs vs floor2 interleaved, N rounds; medians and ratios", run: runAB},
	{name: workerScenario, run: runStampedeWorker, hidden: true},
	{name: floorScenario, run: runFloorServe, hidden: true},
}

// Run runs one scenario: args[0] names it, the rest are its flags.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errors.New("bench: name a scenario")
		}
		return flag.ErrHelp
	}
	for _, s := range scenarios {
		if s.name == args[0] {
			return s.run(ctx, args[1:], &output{w: stdout, errw: stderr})
		}
	}
	usage(stderr)
	return fmt.Errorf("bench: unknown scenario %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: surge bench <scenario> [flags]   (\"surge bench <scenario> -h\" lists the flags)")
	fmt.Fprintln(w)
	for _, s := range scenarios {
		if !s.hidden {
			fmt.Fprintf(w, "  %-18s %s\n", s.name, s.help)
		}
	}
	fmt.Fprintln(w, "\nCommon flags: -redis-addrs a,b,c (one = single node, several = Cluster), -json-only.")
	fmt.Fprintln(w, "The last stdout line is one JSON object with the figures.")
}

// common holds the flags every scenario takes.
type common struct {
	addrs    string
	jsonOnly bool
}

func newFlags(name string, out *output) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet("surge bench "+name, flag.ContinueOnError)
	fs.SetOutput(out.errw)
	c := &common{}
	fs.StringVar(&c.addrs, "redis-addrs", "127.0.0.1:6379", "Redis address(es), comma-separated; several = Redis Cluster")
	fs.BoolVar(&c.jsonOnly, "json-only", false, "print only the final JSON line")
	return fs, c
}

func (c *common) addrList() []string { return commalist.Split(c.addrs) }

// client connects to the Redis of the flags and checks that it answers.
func (c *common) client(ctx context.Context, poolSize int) (redis.UniversalClient, error) {
	addrs := c.addrList()
	if len(addrs) == 0 {
		return nil, errors.New("bench: -redis-addrs is empty")
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, PoolSize: poolSize})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("bench: Redis at %s is not answering: %w", strings.Join(addrs, ","), err)
	}
	return rdb, nil
}

// output writes the human summary (unless -json-only) and the final JSON line.
type output struct {
	w, errw  io.Writer
	jsonOnly bool
}

func (o *output) printf(format string, args ...any) {
	if !o.jsonOnly {
		fmt.Fprintf(o.w, format, args...)
	}
}

func (o *output) json(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.w, "%s\n", b)
	return err
}

func runID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ms converts a duration to fractional milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// startCPUProfile profiles this process into the file at path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// nameCounter is a go-redis hook counting the commands a client sends by name (each command of
// a pipeline; EVALSHA by its script's SHA's start).
type nameCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *nameCounter) note(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	for _, cmd := range cmds {
		name := cmd.FullName()
		if sha, ok := cmd.Args()[min(1, len(cmd.Args())-1)].(string); name == "evalsha" && ok {
			name += " " + sha[:min(8, len(sha))]
		}
		c.n[name]++
	}
}

// take returns the counts so far and starts again from zero.
func (c *nameCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

func (c *nameCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *nameCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.note(cmd); return next(ctx, cmd) }
}
func (c *nameCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.note(cmds...); return next(ctx, cmds) }
}

// dist summarises a sample of durations.
type dist struct {
	N    int           `json:"n"`
	Mean time.Duration `json:"-"`
	P50  time.Duration `json:"-"`
	P99  time.Duration `json:"-"`
	Max  time.Duration `json:"-"`
}

func summarize(sample []time.Duration) dist {
	if len(sample) == 0 {
		return dist{}
	}
	s := slices.Clone(sample)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return dist{N: len(s), Mean: sum / time.Duration(len(s)), P50: at(0.50), P99: at(0.99), Max: s[len(s)-1]}
}

// forEachMaster runs fn on every master of a Cluster, or on the single node.
func forEachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, node *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	default:
		return fmt.Errorf("bench: unsupported Redis client %T", rdb)
	}
}

// maxScanKeys bounds how many keys a scan of one run's keys may visit (a run creates far
// fewer; hitting the bound means something else matches the pattern).
const maxScanKeys = 10_000_000

// scanKeys calls fn with the keys matching pattern on every master, in batches. The masters are
// scanned concurrently, but fn is called by one at a time.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string, fn func(ctx context.Context, node *redis.Client, keys []string) error) error {
	var mu sync.Mutex
	return forEachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		seen := 0
		for {
			keys, next, err := node.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				mu.Lock()
				err := fn(ctx, node, keys)
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			if seen += len(keys); seen > maxScanKeys {
				return fmt.Errorf("bench: more than %d keys match %s", maxScanKeys, pattern)
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
}

// countKeys counts the keys matching pattern over every master.
func countKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) (int, error) {
	n := 0
	err := scanKeys(ctx, rdb, pattern, func(_ context.Context, _ *redis.Client, keys []string) error {
		n += len(keys)
		return nil
	})
	return n, err
}

// deleteKeys removes the keys matching pattern from every master (UNLINK per node, so keys of
// different slots never share a command). It uses its own deadline, so it also runs after ctx
// was cancelled.
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) (int, error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	n := 0
	err := scanKeys(dctx, rdb, pattern, func(ctx context.Context, node *redis.Client, keys []string) error {
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Unlink(ctx, k)
			}
			return nil
		})
		n += len(keys)
		return err
	})
	return n, err
}

// unlink deletes named keys one by one (they may lie in different slots), ignoring ctx's end.
func unlink(ctx context.Context, rdb redis.UniversalClient, keys ...string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	for _, k := range keys {
		errs = append(errs, rdb.Unlink(dctx, k).Err())
	}
	return errors.Join(errs...)
}

// Payload is the small JSON struct the scenarios cache.
type Payload struct {
	ID    int64    `json:"id"`
	Name  string   `json:"name"`
	Price int64    `json:"price"`
	Stock int      `json:"stock"`
	Tags  []string `json:"tags"`
}

func payloadFor(id int64) Payload {
	return Payload{ID: id, Name: fmt.Sprintf("shop %d", id), Price: 1999 + id%100, Stock: int(id % 1000), Tags: []string{"flash", "sale"}}
}
