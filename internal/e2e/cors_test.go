package e2e_test

// Issue 13, item 1: web apps served on other origins. A page on an allowed origin calls the API
// with a bearer token and subscribes over graphql-ws; a page on any other origin cannot, and the
// CSRF rules (JSON bodies only, no mutation over GET) still hold.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/browsertest"
	"github.com/surgekit/surge/internal/testenv"
)

// appPage serves the page of a web app on an origin of its own: an empty document that loads
// graphql-ws's browser build (from the JS clients' npm directory).
func appPage(t *testing.T) *httptest.Server {
	t.Helper()
	bundle, err := os.ReadFile(filepath.Join(jsClientsDir(t), "node_modules/graphql-ws/umd/graphql-ws.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>app</title><script src="/graphql-ws.js"></script>`)
	})
	mux.HandleFunc("GET /graphql-ws.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write(bundle)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// corsEnv is a production server that allows the origin of one page (allowed) and not of
// another (refused), both on 127.0.0.1 but on their own ports, so other origins than the API's.
func corsEnv(t *testing.T) (e *env, allowed, refused *httptest.Server) {
	t.Helper()
	allowed, refused = appPage(t), appPage(t)
	e = startWith(t, map[string]string{"SURGE_CORS_ORIGINS": allowed.URL})
	return e, allowed, refused
}

// fetchMe is the page's fetch of { me { phone } } with a bearer token: the response's status
// and body, or the exception the browser raised.
const fetchMe = `(async () => {
  try {
    const r = await fetch(%q, {method: 'POST',
      headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + %q},
      body: JSON.stringify({query: '{ me { phone } }'})});
    return {status: r.status, body: await r.json()};
  } catch (e) { return {error: String(e)}; }
})()`

// subscribeStock is the page's graphql-ws subscription to voucherStock, logged in through
// connection_init: the first value, or how the connection failed.
const subscribeStock = `new Promise((resolve) => {
  const client = graphqlWs.createClient({url: %q, retryAttempts: 0,
    connectionParams: {Authorization: 'Bearer ' + %q},
    on: {closed: (ev) => resolve({closed: ev.code})}});
  client.subscribe({query: 'subscription($v: ID!) { voucherStock(voucherId: $v) }', variables: {v: %q}}, {
    next: (r) => { resolve({data: r.data}); client.dispose(); },
    error: (e) => resolve({error: String((e && (e.message || e.code)) || e)}),
    complete: () => {},
  });
})`

type pageFetch struct {
	Status int
	Body   struct {
		Data   map[string]any
		Errors []gqlError
	}
	Error string
}

type pageSubscription struct {
	Data   map[string]any
	Error  string
	Closed int
}

func TestCrossOriginPageInChromium(t *testing.T) {
	needChromium(t)
	e, allowed, refused := corsEnv(t)
	phone := testenv.Phone()
	token := e.login(phone)
	voucher := strconv.Itoa(e.warmVoucher(7))
	api, ws := e.url+"/query", "ws"+strings.TrimPrefix(e.url, "http")+"/query"

	run := func(t *testing.T, page *httptest.Server) (f pageFetch, s pageSubscription) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := browsertest.Open(ctx, page.URL+"/")
		if p != nil {
			defer p.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Eval(fmt.Sprintf(fetchMe, api, token), &f); err != nil {
			t.Fatal(err)
		}
		if err := p.Eval(fmt.Sprintf(subscribeStock, ws, token, voucher), &s); err != nil {
			t.Fatal(err)
		}
		return f, s
	}

	t.Run("allowed", func(t *testing.T) {
		f, s := run(t, allowed)
		if f.Error != "" || f.Status != http.StatusOK || str(f.Body.Data, "me", "phone") != phone {
			t.Errorf("fetch with Authorization from %s: %+v; want me.phone %s", allowed.URL, f, phone)
		}
		if got := get(s.Data, "voucherStock"); got != float64(7) {
			t.Errorf("graphql-ws subscription from %s: %+v; want voucherStock 7", allowed.URL, s)
		}
	})
	t.Run("refused", func(t *testing.T) {
		f, s := run(t, refused)
		if !strings.Contains(f.Error, "Failed to fetch") {
			t.Errorf("fetch from %s: %+v; want the browser to refuse it (TypeError: Failed to fetch)", refused.URL, f)
		}
		if s.Data != nil || (s.Error == "" && s.Closed == 0) {
			t.Errorf("graphql-ws subscription from %s: %+v; want the connection refused", refused.URL, s)
		}
	})
}

// TestCORSHeaders checks the preflight and the headers of actual requests, for an allowed
// and a refused origin, and that CORS leaves the CSRF rules as they were.
func TestCORSHeaders(t *testing.T) {
	e, allowed, refused := corsEnv(t)
	preflight := func(origin, method, headers string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, e.url+"/query", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", headers)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	resp := preflight(allowed.URL, "POST", "authorization,content-type")
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != allowed.URL {
		t.Fatalf("preflight from %s: %d %v", allowed.URL, resp.StatusCode, h)
	}
	for name, want := range map[string][]string{
		"Access-Control-Allow-Methods": {"GET", "POST"},
		"Access-Control-Allow-Headers": {"Authorization", "Content-Type"},
		"Vary":                         {"Origin"},
	} {
		for _, w := range want {
			if !strings.Contains(strings.Join(h.Values(name), ","), w) {
				t.Errorf("preflight %s: %q, want %s in it", name, h.Values(name), w)
			}
		}
	}
	if age, err := strconv.Atoi(h.Get("Access-Control-Max-Age")); err != nil || age <= 0 {
		t.Errorf("preflight Access-Control-Max-Age: %q", h.Get("Access-Control-Max-Age"))
	}
	if h.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("credentials allowed without SURGE_CORS_CREDENTIALS: %v", h)
	}

	resp = preflight(refused.URL, "POST", "authorization,content-type")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from %s: %d %v; want 403 without Access-Control-Allow-Origin", refused.URL, resp.StatusCode, resp.Header)
	}

	// An actual request from the allowed origin carries the CORS headers; from another origin
	// it carries none (the browser hides the answer), and the answer varies by Origin.
	for origin, want := range map[string]string{allowed.URL: allowed.URL, refused.URL: ""} {
		req := mustRequest(http.MethodPost, e.url+"/query", gqlBody(`{ __typename }`, nil), "application/json")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
			t.Errorf("POST from %s: Access-Control-Allow-Origin %q, Vary %q; want %q and Origin", origin, got, resp.Header.Get("Vary"), want)
		}
	}

	// CSRF: what a form or a plain fetch can send without a preflight is still refused, from
	// an allowed origin too.
	for name, c := range map[string]struct {
		method, contentType, body string
		status                    int
	}{
		"form":       {http.MethodPost, "application/x-www-form-urlencoded", "query=mutation%7Blogout%7D", http.StatusUnsupportedMediaType},
		"text/plain": {http.MethodPost, "text/plain", `{"query":"mutation { logout }"}`, http.StatusUnsupportedMediaType},
		"multipart":  {http.MethodPost, "multipart/form-data; boundary=x", "--x--", http.StatusUnsupportedMediaType},
	} {
		req := mustRequest(c.method, e.url+"/query", []byte(c.body), c.contentType)
		req.Header.Set("Origin", allowed.URL)
		if r := e.send(req); r.Status != c.status || r.code() != "BAD_REQUEST" {
			t.Errorf("%s: %d %s; want %d BAD_REQUEST", name, r.Status, r.Raw, c.status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/query?query=mutation%7Blogout%7D", nil)
	req.Header.Set("Origin", allowed.URL)
	if r := e.send(req); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("mutation over GET: %d %s; want 405", r.Status, r.Raw)
	}

	// The WebSocket handshake: the allowed origin is accepted, another refused (403).
	e.ws(nil, http.Header{"Origin": {allowed.URL}})
	if _, resp, err := e.dialWS(http.Header{"Origin": {refused.URL}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("WebSocket from %s: %v %v; want 403", refused.URL, err, resp)
	}
}

// Issue 33, item 3: with SURGE_CORS_ORIGINS=https://*.example.com and credentials, origins no
// browser sends were echoed with Access-Control-Allow-Credentials: true. Each is now refused:
// no CORS header on a request, 403 on a preflight and on the WebSocket handshake; a real
// subdomain is still allowed. A glob over a public suffix does not start.
func TestCORSOriginsParsedStrictly(t *testing.T) {
	e := startWith(t, map[string]string{"SURGE_CORS_ORIGINS": "https://*.example.com", "SURGE_CORS_CREDENTIALS": "true"})
	request := func(method, origin string) *http.Response {
		t.Helper()
		req := mustRequest(method, e.url+"/query", gqlBody(`{ __typename }`, nil), "application/json")
		req.Header.Set("Origin", origin)
		if method == http.MethodOptions {
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, origin := range []string{
		"https://evil.net#.example.com", "https://evil.net?.example.com", `https://evil.net\.example.com`,
		"https://evil.net%2F.example.com", "https://.example.com", "https://a..example.com",
	} {
		if resp := request(http.MethodPost, origin); resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("POST from %s: %v; want no Access-Control-Allow-* header", origin, resp.Header)
		}
		if resp := request(http.MethodOptions, origin); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d %v; want 403", origin, resp.StatusCode, resp.Header)
		}
		if _, resp, err := e.dialWS(http.Header{"Origin": {origin}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("WebSocket from %s: %v %v; want 403", origin, err, resp)
		}
	}
	const good = "https://app.example.com"
	if resp := request(http.MethodPost, good); resp.Header.Get("Access-Control-Allow-Origin") != good || resp.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("POST from %s: %v; want it allowed with credentials", good, resp.Header)
	}
	e.ws(nil, http.Header{"Origin": {good}})

	for _, glob := range []string{"https://*.co.uk", "https://*.com.cn", "https://*.github.io"} {
		_, err := app.ParseConfig(nil, func(k string) string {
			return map[string]string{"SURGE_REDIS_ADDRS": testenv.RedisAddr(), "SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d",
				"SURGE_CORS_ORIGINS": glob, "SURGE_CORS_CREDENTIALS": "true"}[k]
		})
		if err == nil || !strings.Contains(err.Error(), "public suffix") {
			t.Errorf("SURGE_CORS_ORIGINS=%s with credentials: %v; want a refusal at start naming the public suffix", glob, err)
		}
	}
}
