package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/surgekit/surge/internal/app"
)

// benchServer is the server bench subscriptions talks to: this process's app on a loopback
// port, a re-executed `surge serve`, or a server someone started.
type benchServer struct {
	base string      // http://host:port
	pid  int         // its process, for /proc
	app  *app.App    // in process: goroutines and Hub reads straight from it
	cmds *cmdCounter // in process: the app's Redis commands
	stop func()
}

// serverSample is what the bench reads of the server at one moment.
type serverSample struct {
	at         time.Time
	cpu        time.Duration // user + system since start
	rssMB      float64
	goroutines int
	hubReads   int64
	heapMB     float64 // Go heap in use (spans with objects), stacks in use
	stackMB    float64
	redis      int64 // the server's Redis commands (out of process: pool round trips, a pipeline counts one)
}

func (s *benchServer) sample(ctx context.Context) (serverSample, error) {
	smp := serverSample{at: time.Now(), cpu: procCPU(s.pid), rssMB: procRSSMB(s.pid)}
	if s.app != nil {
		st := s.app.Live.Stats()
		smp.goroutines, smp.hubReads, smp.redis = runtime.NumGoroutine(), st.OrderReads+st.StockReads, s.cmds.n.Load()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		smp.heapMB, smp.stackMB = float64(ms.HeapInuse)/(1<<20), float64(ms.StackInuse)/(1<<20)
		return smp, nil
	}
	m, err := scrapeMetrics(ctx, s.base+"/metrics")
	if err != nil {
		return smp, err
	}
	smp.goroutines, smp.hubReads = int(m["go_goroutines"]), int64(m["surge_live_reads_total"])
	smp.heapMB, smp.stackMB = m["go_memstats_heap_inuse_bytes"]/(1<<20), m["go_memstats_stack_inuse_bytes"]/(1<<20)
	smp.redis = int64(m["surge_redis_pool_hits_total"] + m["surge_redis_pool_misses_total"])
	return smp, nil
}

func startServerInProcess(a *app.App, cmds *cmdCounter) (*benchServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: a.Handler}
	go func() { _ = srv.Serve(ln) }()
	return &benchServer{base: "http://" + ln.Addr().String(), pid: os.Getpid(), app: a, cmds: cmds, stop: func() { _ = srv.Close() }}, nil
}

// startServerProcess runs this binary as `surge serve` with the config flags given to the
// bench, on a loopback port, with what the scenario needs: dev mode (login codes come back),
// no consumer (orders stay QUEUED until the bench runs one), no grab rate limit, room for
// every connection from one address, /metrics on the main listener.
func startServerProcess(ctx context.Context, config []string, conns int, out *output) (*benchServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve"}, config...)
	args = append(args, "-addr=127.0.0.1:0", "-admin-addr=", "-mode=dev", "-seed=false", "-seckill-consumer=false",
		"-seckill-rate=-1", "-ws-max-connections-per-ip="+strconv.Itoa(conns+10), "-log-level=warn")
	srv, err := startServe(ctx, exe, args, nil, out.errw)
	if err != nil {
		return nil, fmt.Errorf("bench subscriptions: %w", err)
	}
	return srv, nil
}

// startServe runs exe with args (a `surge serve` that listens on 127.0.0.1:0; env nil: this
// process's environment) and returns once it says where it listens; stop sends SIGTERM and
// waits for it to exit (kills it after 15 s).
func startServe(ctx context.Context, exe string, args, env []string, stderr io.Writer) (*benchServer, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "surge: API at "); ok {
				found <- strings.Replace(strings.TrimSuffix(u, "/"), "//localhost:", "//127.0.0.1:", 1)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case base := <-found:
		return &benchServer{base: base, pid: cmd.Process.Pid, stop: stop}, nil
	case <-exited:
		return nil, errors.New("the server process exited before listening (see its log)")
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	stop()
	return nil, errors.New("the server process did not start listening in time")
}

// procCPU is a process's user + system CPU time so far (/proc/<pid>/stat, in clock ticks of
// 1/100 s, the Linux value).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3, state
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func procRSSMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func rssMB() float64 { return round3(procRSSMB(os.Getpid())) }

// scrapeMetrics reads a Prometheus text exposition: each metric's samples summed over labels.
func scrapeMetrics(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench subscriptions: %s answered %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads a Prometheus text exposition into name → value, summing over labels.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		name := l[:strings.IndexAny(l+" ", "{ ")]
		f := strings.Fields(l[len(name):])
		if len(f) == 0 {
			continue
		}
		if strings.HasPrefix(f[0], "{") { // labels: the value follows the closing brace
			f = strings.Fields(l[strings.LastIndexByte(l, '}')+1:])
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			m[name] += v
		}
	}
	return m, sc.Err()
}
