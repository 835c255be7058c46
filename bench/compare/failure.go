package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---- panic: a loader that panics ------------------------------------------------------------

// panicResult is what a child process reports about one library and a panicking loader.
type panicResult struct {
	Errors    int64   `json:"errors"`     // callers answered with an error
	Panics    int64   `json:"panics"`     // callers the panic was re-raised in (recovered by the caller)
	OtherWait float64 `json:"other_wait"` // ms another instance waited to load the key afterwards
	OtherErr  string  `json:"other_err,omitempty"`
}

const panicCallers = 10

// panicScenario runs the panicking loader in a child process (this binary, -panic-child), so
// that a library which re-panics where nobody can recover shows as a dead process, not a
// dead benchmark.
func panicScenario(ctx context.Context, c config, runID string, l library, r *Result) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe, "-panic-child", l.name, "-redis", c.redis, "-run", runID)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.PanicSurvived = false
		return nil
	}
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var pr panicResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &pr); err != nil {
		return fmt.Errorf("panic child: %w (output %q)", err, out)
	}
	r.PanicSurvived, r.PanicErrors, r.PanicPanics, r.PanicOtherWaitMS = true, pr.Errors, pr.Panics, pr.OtherWait
	if pr.OtherErr != "" {
		r.PanicOtherErr = pr.OtherErr
	}
	return nil
}

// panicChild is the child's side: panicCallers callers (each recovering, as net/http does per
// request) share one load whose loader panics; then another instance (another process) loads
// the same key and the time it waits is measured (a lock the panic left behind shows here).
func panicChild(ctx context.Context, l library, addr string) error {
	a, err := l.newInstance(ctx, setup{scenario: "panic", addr: addr})
	if err != nil {
		return err
	}
	defer a.close()
	var res panicResult
	var errs, panics atomic.Int64
	var wg sync.WaitGroup
	for range panicCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if recover() != nil {
					panics.Add(1)
				}
			}()
			_, err := a.take(ctx, "panic", "p", func(context.Context, string) (Payload, error) {
				time.Sleep(20 * time.Millisecond)
				panic("loader bug")
			})
			if err != nil {
				errs.Add(1)
			}
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // a re-panic in a goroutine of the library's kills us here
	res.Errors, res.Panics = errs.Load(), panics.Load()
	b, err := l.newInstance(ctx, setup{scenario: "panic", addr: addr})
	if err != nil {
		return err
	}
	defer b.close()
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = b.take(bctx, "panic", "p", func(context.Context, string) (Payload, error) { return payloadFor(1), nil })
	res.OtherWait = msf(time.Since(start))
	if err != nil {
		res.OtherErr = err.Error()
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return nil
}

// ---- outage: reads during a hung Redis ------------------------------------------------------

// privateRedis is a redis-server of the run's own, which the outage scenario stops with
// SIGSTOP (a hung Redis keeps its connections open and answers nothing).
type privateRedis struct {
	addr string
	cmd  *exec.Cmd
}

func startPrivateRedis(ctx context.Context) (*privateRedis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir, err := os.MkdirTemp("", "compare-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &privateRedis{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
	c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(ctx).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("private redis-server did not start")
		}
	}
	return p, nil
}

func (p *privateRedis) freeze() { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *privateRedis) thaw()   { _ = p.cmd.Process.Signal(syscall.SIGCONT) }
func (p *privateRedis) stop() {
	p.thaw()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	_ = os.RemoveAll(p.cmd.Args[len(p.cmd.Args)-1])
}

const outageKeys = 100

// outage warms outageKeys keys (read twice, so in-process copies exist where the library keeps
// them), hangs Redis for c.outage while c.readers goroutines read them through the library's
// read-through call (no deadline of their own, default go-redis clients), and counts the reads
// answered with the right value, and the loader calls.
func outage(ctx context.Context, c config, srv *privateRedis, l library, r *Result) error {
	in, err := l.newInstance(ctx, setup{scenario: "outage", addr: srv.addr, local: true})
	if err != nil {
		return err
	}
	defer in.close()
	var loads atomic.Int64
	load := func(_ context.Context, id string) (Payload, error) {
		loads.Add(1)
		n, _ := strconv.ParseInt(id, 10, 64)
		return payloadFor(n), nil
	}
	for pass := 0; pass < 2; pass++ {
		for i := range outageKeys {
			if _, err := in.take(ctx, "outage", strconv.Itoa(i), load); err != nil {
				return err
			}
		}
		time.Sleep(100 * time.Millisecond) // let write events pass before the copies are kept
	}
	loads.Store(0)
	srv.freeze()
	thawed := false
	defer func() {
		if !thawed {
			srv.thaw()
		}
	}()
	var ok, failed atomic.Int64
	stop := time.Now().Add(c.outage)
	var wg sync.WaitGroup
	for g := range c.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for time.Now().Before(stop) && ctx.Err() == nil {
				i := rng.IntN(outageKeys)
				v, err := in.take(ctx, "outage", strconv.Itoa(i), load)
				if err == nil && v.ID == int64(i) {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Until(stop))
	srv.thaw()
	thawed = true
	wg.Wait() // calls stuck in the hung Redis finish once it answers again
	r.OutageReadsPerS = float64(ok.Load()) / c.outage.Seconds()
	r.OutageFailed, r.OutageLoads = failed.Load(), loads.Load()
	return ctx.Err()
}

// ---- logical: loads per expiry window of a hot key ------------------------------------------

// logical has c.procs instances × 4 goroutines read one hot key without pause for c.windows
// expiry windows of c.window each, the loader taking 20 ms, and counts loads per window and
// the read latency (a rebuild that makes readers wait shows in the p99).
func logical(ctx context.Context, c config, l library, r *Result) error {
	insts, closeAll, err := newInstances(ctx, l, c.procs, setup{scenario: "logical", addr: c.redis, ttl: c.window, logical: true})
	if err != nil {
		return err
	}
	defer closeAll()
	var loads atomic.Int64
	load := func(context.Context, string) (Payload, error) {
		loads.Add(1)
		time.Sleep(20 * time.Millisecond)
		return payloadFor(7), nil
	}
	if _, err := insts[0].take(ctx, "logical", "hot", load); err != nil {
		return err
	}
	loads.Store(0)
	start := time.Now()
	stop := start.Add(time.Duration(c.windows) * c.window)
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	for _, in := range insts {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for time.Now().Before(stop) && ctx.Err() == nil {
					t := time.Now()
					if v, err := in.take(ctx, "logical", "hot", load); err != nil || v.ID != 7 {
						errs.Add(1)
					}
					mine = append(mine, time.Since(t))
					time.Sleep(time.Millisecond)
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if len(lat) == 0 {
		return ctx.Err()
	}
	slices.Sort(lat)
	windows := float64(time.Since(start)) / float64(c.window)
	r.LogicalLoadsPerWindow = float64(loads.Load()) / windows
	r.LogicalReadP99MS = msf(lat[len(lat)*99/100])
	r.LogicalErrors = errs.Load()
	return ctx.Err()
}
