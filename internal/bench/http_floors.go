package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/commalist"
	"github.com/surgekit/surge/internal/floor"
)

// floorScenario is the hidden scenario `bench http -floors-process` runs in a child process:
// the two floors, served until the parent closes the child's stdin.
const floorScenario = "floor-serve"

// serveFloors serves floor0 and floor2 (over the sale and sessions under ns) on loopback
// until ctx ends; it returns their URLs at once and a stop that shuts them.
func serveFloors(rdb redis.UniversalClient, ns string) (urls [2]string, stop func(), err error) {
	var servers []*http.Server
	stop = func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	for i, h := range []http.Handler{floor.Fixed(), floor.Serving(rdb, ns)} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return urls, nil, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
		urls[i] = "http://" + ln.Addr().String() + "/query"
	}
	return urls, stop, nil
}

// runFloorServe is the child's side: it prints "floor0 <url>" and "floor2 <url>" and serves
// until its stdin closes (the parent is done, or gone).
func runFloorServe(ctx context.Context, args []string, out *output) error {
	fs := flag.NewFlagSet("surge bench "+floorScenario, flag.ContinueOnError)
	fs.SetOutput(out.errw)
	addrs := fs.String("redis-addrs", "", "Redis address(es)")
	pool := fs.Int("redis-pool-size", 0, "connections of the floor's Redis client (0: go-redis's default)")
	ns := fs.String("namespace", "", "floor2's namespace (its sale and sessions, made by the parent)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addrs == "" || *ns == "" {
		return errors.New("floor-serve: -redis-addrs and -namespace are required (this is started by bench http -floors-process)")
	}
	// The password comes in the environment, not on a command line anyone can list.
	rdb := floor.Client(commalist.Split(*addrs), os.Getenv("SURGE_REDIS_PASSWORD"), *pool)
	defer rdb.Close()
	urls, stop, err := serveFloors(rdb, *ns)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(out.w, "floor0 %s\nfloor2 %s\n", urls[0], urls[1])
	closed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return nil
}

// startFloorProcess runs the floors in a child process (this binary, re-executed): the
// floors then have a process of their own, as a deployment's server does, instead of sharing
// this one's CPU share and Go runtime with the load. stop ends the child.
func startFloorProcess(ctx context.Context, addrs []string, password string, pool int, ns string) (urls [2]string, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return urls, nil, err
	}
	cmd := exec.Command(exe, "bench", floorScenario, "-redis-addrs", strings.Join(addrs, ","),
		"-redis-pool-size", strconv.Itoa(pool), "-namespace", ns)
	cmd.Env = append(os.Environ(), workerEnv+"=1", "SURGE_REDIS_PASSWORD="+password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return urls, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return urls, nil, err
	}
	if err := cmd.Start(); err != nil {
		return urls, nil, fmt.Errorf("starting the floors' process (%s): %w", exe, err)
	}
	stop = func() {
		_ = stdin.Close() // the child returns on EOF
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	type said struct {
		urls [2]string
		err  error
	}
	got := make(chan said, 1)
	go func() {
		var r said
		sc := bufio.NewScanner(stdout)
		for i := 0; i < 2 && sc.Scan(); i++ {
			name, url, _ := strings.Cut(sc.Text(), " ")
			if name != fmt.Sprintf("floor%d", 2*i) {
				r.err = fmt.Errorf("the floors' process said %q", sc.Text())
				break
			}
			r.urls[i] = url
		}
		if r.err == nil && r.urls[1] == "" {
			r.err = errors.New("the floors' process exited")
		}
		got <- r
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case r := <-got:
		urls, err = r.urls, r.err
	case <-time.After(30 * time.Second):
		err = errors.New("the floors' process printed no URLs in 30 s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		stop()
		return urls, nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return urls, stop, nil
}
