package e2e_test

// Logging in to a production deployment (issue 35, item 6): `surge serve` in production mode on
// real Redis and MariaDB never returns a login code; SURGE_LOGIN_CODE_SENDER makes the code reach
// the operator, in the server's log or at a webhook, and nowhere else.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	sendCodeOp = `mutation($p: String!) { sendLoginCode(phone: $p) { phone expiresIn retryAfter devCode } }`
	loginOp    = `mutation($p: String!, $c: String!) { login(phone: $p, code: $c) { token user { phone role } } }`
)

// logCode waits until the server's log (JSON, written in batches) holds a "login code" line
// for phone (masked) past the first skip such lines, and returns its code and the line.
func logCode(t *testing.T, p *surgeProc, phone string, skip int) (code, line string) {
	t.Helper()
	masked := phone[:3] + "****" + phone[7:]
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		seen := 0
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "login code" || m["phone"] != masked {
				continue
			}
			if seen++; seen > skip {
				c, _ := m["code"].(string)
				return c, l
			}
		}
	}
	t.Fatalf("no login code for %s in the server's log:\n%s", masked, tail(p.stderr.String(), 4<<10))
	return "", ""
}

// The compose stack's way in: the code in the server's log, at WARN, the phone masked; the
// response holds no code; the code logs the admin in; a warning at start says what the setting
// exposes.
func TestProductionLoginThroughTheLog(t *testing.T) {
	admin := "13800000000"
	vars := productionVars(t, admin)
	vars["SURGE_LOGIN_CODE_SENDER"] = "log"
	vars["SURGE_LOG_FORMAT"] = "json"
	p := startSurge(t, vars)
	c := p.client()

	sent := c.do("", sendCodeOp, map[string]any{"p": admin})
	if len(sent.Errors) > 0 || get(sent.Data, "sendLoginCode", "devCode") != nil || str(sent.Data, "sendLoginCode", "phone") != admin {
		t.Fatalf("sendLoginCode in production: %s", sent.Raw)
	}
	code, line := logCode(t, p, admin, 0)
	if !regexp.MustCompile(`^\d{6}$`).MatchString(code) || !strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, admin) {
		t.Fatalf("the log line %s: want the code at WARN, the phone masked", line)
	}
	in := c.do("", loginOp, map[string]any{"p": admin, "c": code})
	token := str(in.Data, "login", "token")
	if token == "" || str(in.Data, "login", "user", "role") != "ADMIN" {
		t.Fatalf("login with the logged code: %s", in.Raw)
	}
	if str(c.ok(token, `{ me { role } }`, nil), "me", "role") != "ADMIN" {
		t.Error("the token is no admin's")
	}
	for _, r := range []*result{sent, in} {
		if strings.Contains(r.Raw, code) {
			t.Errorf("a response holds the code: %s", r.Raw)
		}
	}
	if !strings.Contains(p.stderr.String(), "SURGE_LOGIN_CODE_SENDER=log: login codes are written to this server's log") {
		t.Error("no warning at start that the log holds login codes")
	}
}

// webhookRecorder is a code webhook: it records what it receives and answers with status.
type webhookRecorder struct {
	mu     sync.Mutex
	status int
	codes  map[string][]string // phone → codes, in order
}

func (w *webhookRecorder) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var body struct{ Phone, Code string }
	_ = json.NewDecoder(r.Body).Decode(&body)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.codes == nil {
		w.codes = map[string][]string{}
	}
	w.codes[body.Phone] = append(w.codes[body.Phone], body.Code)
	rw.WriteHeader(w.status)
}

func (w *webhookRecorder) set(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status = status
}

func (w *webhookRecorder) received(phone string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.codes[phone]...)
}

// A webhook gets each code; a send it refuses fails sendLoginCode (INTERNAL, no code in it),
// is counted, and gives the phone's cooldown back; no response and no log line holds a code.
func TestProductionLoginThroughAWebhook(t *testing.T) {
	hook := &webhookRecorder{status: http.StatusOK}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	admin, user := "13800000000", "13900000001"
	vars := productionVars(t, admin)
	vars["SURGE_LOGIN_CODE_SENDER"] = "webhook:" + srv.URL + "/sms"
	p := startSurge(t, vars)
	c := p.client()
	var responses []*result

	sent := c.do("", sendCodeOp, map[string]any{"p": admin})
	responses = append(responses, sent)
	got := hook.received(admin)
	if len(sent.Errors) > 0 || get(sent.Data, "sendLoginCode", "devCode") != nil || len(got) != 1 {
		t.Fatalf("sendLoginCode: %s; the webhook got %v", sent.Raw, got)
	}
	in := c.do("", loginOp, map[string]any{"p": admin, "c": got[0]})
	responses = append(responses, in)
	if str(in.Data, "login", "user", "role") != "ADMIN" {
		t.Fatalf("login with the webhook's code: %s", in.Raw)
	}

	hook.set(http.StatusServiceUnavailable)
	failed := c.do("", sendCodeOp, map[string]any{"p": user})
	responses = append(responses, failed)
	if failed.code() != "INTERNAL" || failed.Data["sendLoginCode"] != nil {
		t.Fatalf("a send the webhook refused: %s", failed.Raw)
	}
	if n := c.metric(`surge_auth_code_sends_total{result="failed"}`); n != 1 {
		t.Errorf(`surge_auth_code_sends_total{result="failed"} = %v, want 1`, n)
	}
	hook.set(http.StatusOK)
	retry := c.do("", sendCodeOp, map[string]any{"p": user}) // at once: the cooldown was given back
	responses = append(responses, retry)
	got = hook.received(user)
	if len(retry.Errors) > 0 || len(got) != 2 {
		t.Fatalf("the retry: %s; the webhook got %v", retry.Raw, got)
	}
	in = c.do("", loginOp, map[string]any{"p": user, "c": got[1]})
	responses = append(responses, in)
	if str(in.Data, "login", "user", "role") != "USER" {
		t.Fatalf("login with the retry's code: %s", in.Raw)
	}
	if n := c.metric(`surge_auth_code_sends_total{result="sent"}`); n != 2 {
		t.Errorf(`surge_auth_code_sends_total{result="sent"} = %v, want 2`, n)
	}

	time.Sleep(300 * time.Millisecond) // the log is written in batches
	logs := p.stderr.String()
	if !strings.Contains(logs, strings.TrimPrefix(srv.URL, "http://")+" answered 503") {
		t.Errorf("the server's log does not name the webhook's failure:\n%s", tail(logs, 4<<10))
	}
	for _, code := range append(hook.received(admin), hook.received(user)...) {
		for _, r := range responses {
			if strings.Contains(r.Raw, code) {
				t.Errorf("a response holds the code %s: %s", code, r.Raw)
			}
		}
		if strings.Contains(logs, code) {
			t.Errorf("the server's log holds the code %s", code)
		}
	}
}
