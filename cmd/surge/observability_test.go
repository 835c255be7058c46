package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// fetch sends one request and returns the response with its body read.
func fetch(t *testing.T, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAdminListenerProbesAndLogs: with SURGE_ADMIN_ADDR the public listener serves the API
// and the probes but neither /metrics nor the playground, which the admin listener serves
// (with /query, for the playground) and Go's profiles under /debug/pprof/; /livez and /readyz answer; X-Request-Id is honoured
// when usable and echoed, else replaced; SURGE_LOG_FORMAT=json makes every stderr line JSON,
// with one access-log line per request carrying its request id.
func TestAdminListenerProbesAndLogs(t *testing.T) {
	s := startServer(t, t.TempDir(), "SURGE_ADMIN_ADDR=127.0.0.1:0", "SURGE_LOG_FORMAT=json")
	public, admin := s.api, s.base
	if public == admin {
		t.Fatalf("one listener (%s) for the API and the playground", public)
	}
	query := `{"query":"{ shopTypes { id } }"}`
	for _, c := range []struct {
		url, method, body string
		want              int
	}{
		{public + "metrics", http.MethodGet, "", http.StatusNotFound},
		{public, http.MethodGet, "", http.StatusNotFound},
		{public + "livez", http.MethodGet, "", http.StatusOK},
		{public + "readyz", http.MethodGet, "", http.StatusOK},
		{public + "healthz", http.MethodGet, "", http.StatusOK},
		{public + "query", http.MethodPost, query, http.StatusOK},
		{admin + "metrics", http.MethodGet, "", http.StatusOK},
		{admin, http.MethodGet, "", http.StatusOK},
		{admin + "readyz", http.MethodGet, "", http.StatusOK},
		{admin + "query", http.MethodPost, query, http.StatusOK},
		// Go's profiles, the execution trace among them, on the admin listener only
		{public + "debug/pprof/", http.MethodGet, "", http.StatusNotFound},
		{public + "debug/pprof/trace?seconds=0.1", http.MethodGet, "", http.StatusNotFound},
		{admin + "debug/pprof/", http.MethodGet, "", http.StatusOK},
		{admin + "debug/pprof/trace?seconds=0.1", http.MethodGet, "", http.StatusOK},
		{admin + "debug/pprof/goroutine?debug=1", http.MethodGet, "", http.StatusOK},
	} {
		if resp, body := fetch(t, c.method, c.url, c.body); resp.StatusCode != c.want {
			t.Errorf("%s %s: %d %.200s, want %d", c.method, c.url, resp.StatusCode, body, c.want)
		}
	}
	if _, body := fetch(t, http.MethodGet, public+"livez", ""); strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Errorf("/livez: %s", body)
	}
	var ready map[string]string
	if _, body := fetch(t, http.MethodGet, public+"readyz", ""); json.Unmarshal([]byte(body), &ready) != nil || ready["redis"] != "ok" || ready["database"] != "ok" {
		t.Errorf("/readyz: %s, want redis and database ok", body)
	}

	// Request ids: a usable one is kept and echoed; one that could break a log line is not.
	resp, _ := fetch(t, http.MethodPost, public+"query", query, "X-Request-Id", "client-id-42")
	if got := resp.Header.Get("X-Request-Id"); got != "client-id-42" {
		t.Errorf("X-Request-Id client-id-42 echoed as %q", got)
	}
	resp, _ = fetch(t, http.MethodPost, public+"query", query, "X-Request-Id", `bad id "x"`)
	// (not strings.Contains(got, "bad"): a fresh id is hex, and "bad" is hex too)
	if got := resp.Header.Get("X-Request-Id"); got == "" || strings.ContainsAny(got, `" `) {
		t.Errorf("unusable X-Request-Id answered with %q, want a fresh id", got)
	}
	resp, _ = fetch(t, http.MethodGet, public+"livez", "")
	generated := resp.Header.Get("X-Request-Id")

	// The admin listener's metrics count the public listener's requests by route.
	_, metrics := fetch(t, http.MethodGet, admin+"metrics", "")
	for _, want := range []string{
		`surge_http_requests_total{method="GET",route="/livez",status="200"}`,
		`surge_http_requests_total{method="POST",route="/query",status="200"}`,
		`surge_http_requests_total{method="GET",route="unmatched",status="404"}`,
		`surge_http_request_duration_seconds_bucket{method="POST",route="/query",le="0.005"}`,
		`go_sql_open_connections{db_name="surge"}`,
		`surge_redis_pool_connections{client="main"}`,
		`surge_redis_pool_hits_total{client="streams"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	s.stop()
	lines := map[string]map[string]any{} // access-log lines by request id
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("stderr line is not JSON (%v): %s", err, sc.Text())
		}
		if line["msg"] == "request" {
			id, _ := line["request_id"].(string)
			lines[id] = line
		}
	}
	if l := lines["client-id-42"]; l == nil || l["route"] != "/query" || l["method"] != "POST" || l["status"] != float64(200) || l["operation"] != "query" {
		t.Errorf("access log line of client-id-42: %v", l)
	}
	if l := lines[generated]; l == nil || l["route"] != "/livez" {
		t.Errorf("access log line of the generated id %q: %v", generated, l)
	}
	if !bytes.Contains([]byte(s.stderr.String()), []byte(`"msg":"surge ready"`)) {
		t.Errorf("no JSON startup line")
	}
}
