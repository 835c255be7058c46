package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/surgekit/surge/internal/testenv"
)

// hook is a webhook receiver recording what reached it; answer decides its reply.
type hook struct {
	mu       sync.Mutex
	bodies   []map[string]string
	types    []string
	user     string
	password string
	answer   func(w http.ResponseWriter)
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]string
	err := json.NewDecoder(r.Body).Decode(&body)
	h.mu.Lock()
	if err == nil && r.Method == http.MethodPost {
		h.bodies = append(h.bodies, body)
		h.types = append(h.types, r.Header.Get("Content-Type"))
		h.user, h.password, _ = r.BasicAuth()
	}
	answer := h.answer
	h.mu.Unlock()
	if answer != nil {
		answer(w)
	}
}

func (h *hook) received() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]string(nil), h.bodies...)
}

func TestWebhookSenderDelivers(t *testing.T) {
	h := &hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	withAuth := strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1) + "/sms?key=k"
	if err := (auth.WebhookSender{URL: withAuth}).Send(context.Background(), "13812345678", "493817"); err != nil {
		t.Fatal(err)
	}
	got := h.received()
	if len(got) != 1 || got[0]["phone"] != "13812345678" || got[0]["code"] != "493817" || len(got[0]) != 2 {
		t.Fatalf("the webhook got %v, want one {phone, code}", got)
	}
	if h.types[0] != "application/json" || h.user != "ops" || h.password != "s3cret" {
		t.Errorf("Content-Type %q, basic auth %q:%q", h.types[0], h.user, h.password)
	}
}

// Every way a webhook can fail fails the send, within the sender's timeout, with an error that
// names the host and shows neither the code nor the URL's secrets.
func TestWebhookSenderFailures(t *testing.T) {
	elsewhere := &hook{}
	other := httptest.NewServer(elsewhere)
	defer other.Close()
	for name, answer := range map[string]func(w http.ResponseWriter, hung <-chan struct{}){
		"500": func(w http.ResponseWriter, _ <-chan struct{}) { w.WriteHeader(http.StatusInternalServerError) },
		"404": func(w http.ResponseWriter, _ <-chan struct{}) { w.WriteHeader(http.StatusNotFound) },
		"redirect": func(w http.ResponseWriter, _ <-chan struct{}) {
			w.Header().Set("Location", other.URL)
			w.WriteHeader(http.StatusTemporaryRedirect)
		},
		"hangs": func(_ http.ResponseWriter, hung <-chan struct{}) { <-hung },
	} {
		t.Run(name, func(t *testing.T) {
			hung := make(chan struct{})
			srv := httptest.NewServer(&hook{answer: func(w http.ResponseWriter) { answer(w, hung) }})
			defer srv.Close()
			defer close(hung) // before Close, which waits for the handler
			url := strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1) + "/sms?key=topsecret"
			start := time.Now()
			err := (auth.WebhookSender{URL: url, Timeout: 300 * time.Millisecond}).Send(context.Background(), "13812345678", "493817")
			took := time.Since(start)
			if err == nil {
				t.Fatal("the send succeeded")
			}
			if took > 2*time.Second {
				t.Errorf("the send took %v with a 300 ms timeout", took)
			}
			host := strings.TrimPrefix(srv.URL, "http://")
			if msg := err.Error(); !strings.Contains(msg, host) || strings.Contains(msg, "493817") ||
				strings.Contains(msg, "topsecret") || strings.Contains(msg, "s3cret") {
				t.Errorf("error %q: want the host %s, and no code or secret", msg, host)
			}
		})
	}
	if got := elsewhere.received(); len(got) != 0 {
		t.Errorf("a redirect handed the code to another URL: %v", got)
	}
	if err := (auth.WebhookSender{URL: "http://127.0.0.1:1/"}).Send(context.Background(), "13812345678", "493817"); err == nil || strings.Contains(err.Error(), "493817") {
		t.Errorf("a webhook nobody listens on: %v", err)
	}
}

// SendCode counts what its sender did; a failed send gives the phone's cooldown back.
func TestCodeSendsAreCounted(t *testing.T) {
	h := &hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	reg := prometheus.NewRegistry()
	svc, _, _ := newService(t, testenv.Redis(t), auth.Options{Sender: auth.WebhookSender{URL: srv.URL}, Registerer: reg})
	ctx := context.Background()
	phone := testenv.Phone()
	h.answer = func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }
	if sent, err := svc.SendCode(ctx, phone); err == nil || sent != nil {
		t.Fatalf("a send the webhook refused: %v, %v", sent, err)
	}
	h.mu.Lock()
	h.answer = nil
	h.mu.Unlock()
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatalf("the retry at once: %v", err)
	}
	const want = `
# HELP surge_auth_code_sends_total Login codes handed to the code sender (SMS gateway, webhook, log), by result: sent, or failed (the user saw an error and may retry at once).
# TYPE surge_auth_code_sends_total counter
surge_auth_code_sends_total{result="failed"} 1
surge_auth_code_sends_total{result="sent"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "surge_auth_code_sends_total"); err != nil {
		t.Error(err)
	}
	got := h.received()
	if len(got) != 2 || got[0]["code"] == got[1]["code"] {
		t.Errorf("the webhook got %v: want two different codes", got)
	}
	// The delivered code logs in.
	if _, _, err := svc.Login(ctx, phone, got[1]["code"]); err != nil {
		t.Errorf("login with the delivered code: %v", err)
	}
}

// The log sender an operator chose (SURGE_LOGIN_CODE_SENDER=log) writes the code at its level.
func TestLogSenderLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := (auth.LogSender{Logger: log, Reveal: true, Level: slog.LevelWarn}).Send(context.Background(), "13812345678", "493817"); err != nil {
		t.Fatal(err)
	}
	var line map[string]string
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	if line["level"] != "WARN" || line["msg"] != "login code" || line["code"] != "493817" || line["phone"] != "138****5678" {
		t.Errorf("the log line: %q", buf.String())
	}
	buf.Reset()
	_ = (auth.LogSender{Logger: log, Reveal: true}).Send(context.Background(), "13812345678", "493817")
	if buf.Len() != 0 {
		t.Errorf("an INFO line got past a WARN logger: %q", buf.String())
	}
}
