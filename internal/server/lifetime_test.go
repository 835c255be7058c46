package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/surgekit/surge/internal/auth"
)

// syncBuffer is a log destination safe for the handler's and the release's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHeldRequestEndsWithConnection: a request whose handler holds it (a WebSocket upgrade,
// gqlws.Options.Hold) stays in flight after the handler returns, and its metrics, access-log
// line and per-address connection slot end when the hold is released: the connection's life,
// not the upgrade's.
func TestHeldRequestEndsWithConnection(t *testing.T) {
	logs := &syncBuffer{}
	opts := Options{Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Observability: Observability{AccessLog: true}, WebsocketConnections: 1}
	opts.setDefaults()
	releases := make(chan func(), 1)
	upgrade := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusSwitchingProtocols)
		releases <- holdRequest(r)
	})
	routes := http.NewServeMux()
	routes.Handle("/query", withRequestContext(upgrade, &auth.Service{}, opts.Logger, &opts))
	o := newObserver(&opts)
	h := o.wrap(routes)
	serve := func(upgrade bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/query", nil)
		if upgrade {
			r.Header.Set("Upgrade", "websocket")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	inFlight := func() float64 { return testutil.ToFloat64(o.metrics.inFlight) }
	upgrades := func() float64 {
		return testutil.ToFloat64(o.metrics.requests.WithLabelValues("/query", http.MethodGet, "101"))
	}

	serve(true)
	release := <-releases
	if got := inFlight(); got != 1 {
		t.Fatalf("in flight after the upgrade's handler returned: %v, want 1", got)
	}
	if upgrades() != 0 || strings.Contains(logs.String(), "msg=request") {
		t.Fatalf("the held request was reported when its handler returned: %s", logs)
	}
	// The address's one connection is taken until the hold is released.
	if w := serve(true); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a second connection from the address while the first is open: %d, want 429", w.Code)
	}
	time.Sleep(50 * time.Millisecond)
	release()
	release() // once only
	if got := inFlight(); got != 0 {
		t.Fatalf("in flight after release: %v, want 0", got)
	}
	if got := upgrades(); got != 1 {
		t.Fatalf("requests with status 101: %v, want 1", got)
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "status=101") {
			line = l
		}
	}
	if line == "" || strings.Count(logs.String(), "status=101") != 1 || strings.Contains(line, "duration_ms=0.") {
		t.Fatalf("want one access-log line for the connection, lasting 50 ms or more:\n%s", logs)
	}
	// The slot is free again.
	serve(true)
	(<-releases)()
	if got := inFlight(); got != 0 {
		t.Fatalf("in flight: %v, want 0", got)
	}
}
