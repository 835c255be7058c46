package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Span is one span an OTLPSink received (see internal/otlpsink).
type Span struct {
	Service    string            `json:"service"`
	TraceID    string            `json:"trace_id"`
	SpanID     string            `json:"span_id"`
	ParentID   string            `json:"parent_span_id"`
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	StartNanos uint64            `json:"start_unix_nano"`
	EndNanos   uint64            `json:"end_unix_nano"`
	Status     string            `json:"status"`
	Attributes map[string]string `json:"attributes"`
	Events     []string          `json:"events"`
}

// OTLPSink is a running OTLP/HTTP trace receiver process (internal/otlpsink, a module of its
// own, built once per test process): it decodes the protobuf export requests it is sent.
type OTLPSink struct {
	Endpoint string // http://127.0.0.1:PORT, for SURGE_OTLP_ENDPOINT

	mu    sync.Mutex
	spans []Span
	bad   []string
}

var (
	sinkOnce sync.Once
	sinkDir  string
	sinkBin  string
	sinkErr  error
)

// StartOTLPSink builds (once) and starts an OTLP receiver on a free loopback port; it is
// killed at cleanup.
func StartOTLPSink(t testing.TB) *OTLPSink {
	t.Helper()
	bin := sinkBinary(t)
	cmd := exec.Command(bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &OTLPSink{}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	if !lines.Scan() {
		t.Fatalf("otlpsink printed nothing: %v", lines.Err())
	}
	s.Endpoint = strings.TrimPrefix(lines.Text(), "otlpsink: listening on ")
	if !strings.HasPrefix(s.Endpoint, "http://") {
		t.Fatalf("otlpsink: unexpected first line %q", lines.Text())
	}
	go func() {
		for lines.Scan() {
			var sp Span
			s.mu.Lock()
			if err := json.Unmarshal(lines.Bytes(), &sp); err != nil {
				s.bad = append(s.bad, lines.Text())
			} else {
				s.spans = append(s.spans, sp)
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// Spans are the spans received so far.
func (s *OTLPSink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

// WaitFor waits until done says the spans received so far are enough, and returns them; it
// fails the test after timeout.
func (s *OTLPSink) WaitFor(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := s.Spans()
		if done(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			s.mu.Lock()
			bad := s.bad
			s.mu.Unlock()
			t.Fatalf("otlpsink: still waiting after %v; %d spans received: %s; undecodable lines: %q", timeout, len(spans), describeSpans(spans), bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describeSpans(spans []Span) string {
	var b strings.Builder
	for _, sp := range spans {
		fmt.Fprintf(&b, "\n  %s %s parent=%s %q %s", sp.TraceID, sp.SpanID, sp.ParentID, sp.Name, sp.Kind)
	}
	return b.String()
}

// sinkBinary builds internal/otlpsink once per test process.
func sinkBinary(t testing.TB) string {
	t.Helper()
	sinkOnce.Do(func() {
		_, self, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(self), "..", "otlpsink")
		var err error
		if sinkDir, err = os.MkdirTemp("", "otlpsink-"); err != nil {
			sinkErr = err
			return
		}
		sinkBin = filepath.Join(sinkDir, "otlpsink")
		build := exec.Command(goCommand(), "build", "-o", sinkBin, ".")
		build.Dir = dir
		if b, err := build.CombinedOutput(); err != nil {
			sinkErr = fmt.Errorf("building %s: %v\n%s", dir, err, b)
		}
	})
	if sinkErr != nil {
		t.Fatal(sinkErr)
	}
	return sinkBin
}
