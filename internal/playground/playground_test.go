package playground_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/browsertest"
	"github.com/surgekit/surge/internal/playground"
)

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

var assetRef = regexp.MustCompile(`(?:src|href)="(playground/assets/[^"]+)"`)

// pageAssets returns the asset paths ("/playground/assets/...") the page links.
func pageAssets(t *testing.T, page string) []string {
	t.Helper()
	var out []string
	for _, m := range assetRef.FindAllStringSubmatch(page, -1) {
		out = append(out, "/"+m[1])
	}
	if len(out) != 2 {
		t.Fatalf("page links %d assets, want a script and a stylesheet:\n%s", len(out), page)
	}
	return out
}

var configBlob = regexp.MustCompile(`(?s)<script id="playground-config" type="application/json">(.*?)</script>`)

func pageConfig(t *testing.T, page string) map[string]string {
	t.Helper()
	m := configBlob.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no config blob in page:\n%s", page)
	}
	var cfg map[string]string
	if err := json.Unmarshal([]byte(m[1]), &cfg); err != nil {
		t.Fatalf("config blob %q is not JSON: %v", m[1], err)
	}
	return cfg
}

func TestPage(t *testing.T) {
	h := playground.Handler("/query")
	for _, p := range []string{"/", "/index.html"} {
		rec := get(t, h, http.MethodGet, p, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d", p, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
		if cc := rec.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q", p, cc)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
		page := rec.Body.String()
		if got := pageConfig(t, page)["endpoint"]; got != "/query" {
			t.Errorf("GET %s: endpoint %q, want /query", p, got)
		}
		pageAssets(t, page)
		if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
			t.Errorf("GET %s: page mentions an absolute URL:\n%s", p, page)
		}
	}

	head := get(t, h, http.MethodHead, "/", nil)
	if head.Code != http.StatusOK || head.Body.Len() != 0 {
		t.Errorf("HEAD /: status %d, %d body bytes", head.Code, head.Body.Len())
	}
	if rec := get(t, h, http.MethodPost, "/", nil); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", rec.Code)
	}
	for _, p := range []string{"/other", "/playground/", "/playground/assets/"} {
		if rec := get(t, h, http.MethodGet, p, nil); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, rec.Code)
		}
	}
}

func TestPageEndpointEscaping(t *testing.T) {
	tricky := `/q?a=1&b="x"</script><script>alert(1)</script>`
	rec := get(t, playground.Handler(tricky), http.MethodGet, "/", nil)
	page := rec.Body.String()
	if strings.Contains(page, "<script>alert(1)") {
		t.Fatalf("endpoint not escaped:\n%s", page)
	}
	if got := pageConfig(t, page)["endpoint"]; got != tricky {
		t.Errorf("endpoint round-trips as %q, want %q", got, tricky)
	}

	abs := get(t, playground.Handler("https://api.example.com/graphql"), http.MethodGet, "/", nil)
	if csp := abs.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://api.example.com wss://api.example.com;") {
		t.Errorf("absolute endpoint: Content-Security-Policy %q", csp)
	}
	if got := pageConfig(t, get(t, playground.Handler(""), http.MethodGet, "/", nil).Body.String())["endpoint"]; got != playground.DefaultEndpoint {
		t.Errorf("empty endpoint renders %q, want %q", got, playground.DefaultEndpoint)
	}
}

func TestAssets(t *testing.T) {
	h := playground.Handler("/query")
	page := get(t, h, http.MethodGet, "/", nil).Body.String()
	for _, p := range pageAssets(t, page) {
		want := map[string]string{
			".js":  "text/javascript; charset=utf-8",
			".css": "text/css; charset=utf-8",
		}[filepath.Ext(p)]
		rec := get(t, h, http.MethodGet, p, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d", p, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != want {
			t.Errorf("GET %s: Content-Type %q, want %q", p, ct, want)
		}
		if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("GET %s: Cache-Control %q", p, cc)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", p)
		}
		plain := rec.Body.Bytes()
		if len(plain) < 1000 {
			t.Errorf("GET %s: only %d bytes", p, len(plain))
		}
		if filepath.Ext(p) == ".css" {
			if bytes.Contains(plain, []byte("@import")) || regexp.MustCompile(`url\(\s*['"]?(https?:)?//`).Match(plain) {
				t.Errorf("GET %s: stylesheet loads something from another origin", p)
			}
		}

		// gzip variant decodes to the same bytes.
		gz := get(t, h, http.MethodGet, p, http.Header{"Accept-Encoding": {"gzip, deflate"}})
		if gz.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("GET %s with Accept-Encoding gzip: Content-Encoding %q", p, gz.Header().Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(gz.Body)
		if err != nil {
			t.Fatal(err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(unzipped, plain) {
			t.Errorf("GET %s: gzip body differs from plain body", p)
		}
		if gz.Header().Get("ETag") == rec.Header().Get("ETag") {
			t.Errorf("GET %s: gzip and plain share ETag %s", p, rec.Header().Get("ETag"))
		}

		// Conditional request.
		nm := get(t, h, http.MethodGet, p, http.Header{"If-None-Match": {rec.Header().Get("ETag")}})
		if nm.Code != http.StatusNotModified {
			t.Errorf("GET %s If-None-Match: status %d, want 304", p, nm.Code)
		}
	}

	for _, p := range []string{"/playground/assets/nope.js", "/playground/assets/../index.html", "/playground/assets/app.js"} {
		if rec := get(t, h, http.MethodGet, p, nil); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, rec.Code)
		}
	}
}

// TestPlaygroundInBrowser loads the playground in headless Chromium, runs a
// query through the UI against a real HTTP endpoint, and checks that the page
// requested nothing outside the test server.
func TestPlaygroundInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	if _, err := browsertest.Chromium(); err != nil {
		t.Fatal(err)
	}
	// Chromium's temporary profile and files go below TMPDIR: a private one
	// lets the test check that they are removed and that no Chromium process
	// is left.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	const query = "{ hello }"
	var (
		mu      sync.Mutex
		queries []string
	)
	mux := http.NewServeMux()
	mux.Handle("/", playground.Handler("/query"))
	mux.HandleFunc("/query", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			http.Error(w, "want a JSON body, got "+ct, http.StatusUnsupportedMediaType)
			return
		}
		var body struct {
			Query string `json:"query"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		queries = append(queries, body.Query)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":{"hello":"world"}}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	result, requested, err := browsertest.RunPlaygroundQuery(ctx, srv.URL+"/", query)
	t.Logf("browser run took %v; page requested %d URLs", time.Since(start).Round(time.Millisecond), len(requested))
	for _, u := range requested {
		t.Logf("  requested %.120s", u)
	}
	if err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(result, "world") {
		t.Errorf("response pane shows %q, want it to contain world", result)
	}
	if len(requested) == 0 {
		t.Error("no requests recorded")
	}
	for _, u := range requested {
		if !strings.HasPrefix(u, srv.URL+"/") && !strings.HasPrefix(u, "data:") &&
			!strings.HasPrefix(u, "blob:") && !strings.HasPrefix(u, "about:") {
			t.Errorf("page requested %q, outside the test server %s", u, srv.URL)
		}
	}
	mu.Lock()
	got := append([]string(nil), queries...)
	mu.Unlock()
	found := false
	for _, q := range got {
		if strings.TrimSpace(q) == query {
			found = true
		}
	}
	if !found {
		t.Errorf("/query never got %q; it got %q", query, got)
	}

	// Nothing of Chromium is left: no process using the private TMPDIR, and
	// nothing in it (neither the profile nor Chromium's temporary files).
	if pids := processesMentioning(tmp); len(pids) > 0 {
		t.Errorf("Chromium processes still running: %v", pids)
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		t.Errorf("temporary file or directory %s was left in TMPDIR", e.Name())
	}
}

// processesMentioning returns the pids whose command line contains s.
func processesMentioning(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
