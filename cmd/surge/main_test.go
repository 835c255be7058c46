package main

// Smoke tests of the real surge binary: it is built once (without -race, so the build is
// quick), started as a child process on the embedded default with a fresh data directory,
// and exercised over real HTTP and, for the playground, in a headless Chromium.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/browsertest"
	"github.com/surgekit/surge/internal/testenv"
)

const (
	readyTimeout    = 30 * time.Second // bound on waiting for the URL line and /healthz
	maxStartup      = 15 * time.Second // process start → /healthz 200
	shutdownTimeout = 10 * time.Second // SIGTERM → exit
	adminPhone      = "13800000000"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveSurgeBinary()
	os.Exit(code)
}

func surgeBinary(t *testing.T) string { return testenv.SurgeBinary(t) }

// server is one running surge child process.
type server struct {
	t       *testing.T
	cmd     *exec.Cmd
	base    string        // "http://127.0.0.1:PORT/": the playground's listener
	api     string        // the API's listener: base, unless SURGE_ADMIN_ADDR split them
	startup time.Duration // process start → first /healthz 200
	stderr  *testenv.SyncBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done is closed
}

var (
	urlLine = regexp.MustCompile(`^surge: playground at (http://\S+/)$`)
	apiLine = regexp.MustCompile(`^surge: API at (http://\S+/)$`)
)

// startServer starts the binary with a clean environment (PATH and HOME only, and env) on
// 127.0.0.1:0 with dataDir, waits for its URL lines and for /healthz to answer 200. The
// process is killed in t.Cleanup if it still runs, and its stderr is printed if the test
// failed.
func startServer(t *testing.T, dataDir string, env ...string) *server {
	t.Helper()
	bin := surgeBinary(t)
	s := &server{t: t, stderr: &testenv.SyncBuffer{}, done: make(chan struct{})}
	lines := testenv.NewLineWriter(16)
	s.cmd = exec.Command(bin)
	s.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"SURGE_ADDR=127.0.0.1:0",
		"SURGE_DATA_DIR=" + dataDir,
	}
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Stdout = lines
	s.cmd.Stderr = s.stderr
	s.cmd.WaitDelay = 5 * time.Second // in case something else holds the pipes

	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
				t.Errorf("surge (pid %d) still running 10 s after SIGKILL", s.cmd.Process.Pid)
			}
		}
		if t.Failed() {
			t.Logf("stderr of surge (pid %d):\n%s", s.cmd.Process.Pid, s.stderr.String())
		}
	})

	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for s.base == "" {
		select {
		case line := <-lines.Lines():
			if m := urlLine.FindStringSubmatch(line); m != nil {
				s.base = m[1]
			} else if m := apiLine.FindStringSubmatch(line); m != nil {
				s.api = m[1]
			} else {
				t.Logf("surge stdout: %s", line)
			}
		case <-s.done:
			t.Fatalf("surge exited before printing its URL: %v", s.waitErr)
		case <-deadline.C:
			t.Fatalf("surge printed no playground URL within %v", readyTimeout)
		}
	}
	if !strings.HasPrefix(s.base, "http://127.0.0.1:") || !strings.HasPrefix(s.api, "http://127.0.0.1:") {
		t.Fatalf("API URL %q, playground URL %q, want both on http://127.0.0.1:PORT/", s.api, s.base)
	}

	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(s.base + "healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.startup = time.Since(start)
				return s
			}
		}
		select {
		case <-tick.C:
		case <-s.done:
			t.Fatalf("surge exited before /healthz answered 200: %v", s.waitErr)
		case <-deadline.C:
			t.Fatalf("/healthz did not answer 200 within %v (last: %v)", readyTimeout, describe(resp, err))
		}
	}
}

func describe(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// stop sends SIGTERM and asserts that the process exits with code 0 within shutdownTimeout.
func (s *server) stop() {
	s.t.Helper()
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(shutdownTimeout):
		s.t.Fatalf("surge did not exit within %v of SIGTERM", shutdownTimeout)
	}
	if s.waitErr != nil {
		s.t.Fatalf("surge exited uncleanly after SIGTERM: %v", s.waitErr)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Fatalf("surge exit code %d after SIGTERM, want 0", code)
	}
	s.t.Logf("shutdown: %v", time.Since(start).Round(time.Millisecond))
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// get fetches path below the base URL and returns the status and body.
func (s *server) get(path string) (int, string) {
	s.t.Helper()
	resp, err := httpClient.Get(s.base + path)
	if err != nil {
		s.t.Fatalf("GET /%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("GET /%s: reading body: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// gql POSTs a GraphQL operation to /query and decodes its data into out; any error in the
// response fails the test.
func (s *server) gql(token, query string, vars map[string]any, out any) {
	s.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.base+"query", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST /query %s: %v", query, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("POST /query: reading body: %v", err)
	}
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []any           `json:"errors"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		s.t.Fatalf("POST /query %s: status %s, body %q: %v", query, resp.Status, raw, err)
	}
	if resp.StatusCode != http.StatusOK || len(r.Errors) > 0 {
		s.t.Fatalf("POST /query %s: status %s, body %s", query, resp.Status, raw)
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		s.t.Fatalf("POST /query %s: decoding data %s: %v", query, r.Data, err)
	}
}

type shopsPage struct {
	Shops struct {
		TotalCount int `json:"totalCount"`
		PageInfo   struct {
			HasNextPage bool `json:"hasNextPage"`
		} `json:"pageInfo"`
		Edges []struct {
			Node struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"node"`
		} `json:"edges"`
	} `json:"shops"`
}

const shopsQuery = `query ($first: Int) { shops(first: $first) { totalCount pageInfo { hasNextPage } edges { node { id name } } } }`

func TestEmbeddedDefault(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir)
	t.Logf("startup: %v", s.startup.Round(time.Millisecond))
	if s.startup > maxStartup {
		t.Errorf("startup took %v, want at most %v", s.startup, maxStartup)
	}

	// /healthz names both dependencies.
	code, body := s.get("healthz")
	var health map[string]string
	if err := json.Unmarshal([]byte(body), &health); code != http.StatusOK || err != nil ||
		health["redis"] != "ok" || health["database"] != "ok" {
		t.Fatalf("/healthz: %d %s (%v), want 200 with redis and database ok", code, body, err)
	}

	// Demo data: shop types.
	var types struct {
		ShopTypes []struct{ ID, Name string } `json:"shopTypes"`
	}
	s.gql("", `{ shopTypes { id name } }`, nil, &types)
	var foodType string
	for _, st := range types.ShopTypes {
		if st.Name == "美食" {
			foodType = st.ID
		}
	}
	if foodType == "" || len(types.ShopTypes) != 10 {
		t.Fatalf("shopTypes = %+v, want 10 including 美食", types.ShopTypes)
	}

	// Shops, first page.
	var page shopsPage
	s.gql("", shopsQuery, map[string]any{"first": 3}, &page)
	if n := len(page.Shops.Edges); n != 3 || page.Shops.TotalCount != 10 || !page.Shops.PageInfo.HasNextPage {
		t.Fatalf("shops(first: 3): %d edges, totalCount %d, hasNextPage %v; want 3, 10, true",
			n, page.Shops.TotalCount, page.Shops.PageInfo.HasNextPage)
	}

	// The vouchers of the demo data, on whichever shop holds them.
	var withVouchers struct {
		Shops struct {
			Edges []struct {
				Node struct {
					Name     string `json:"name"`
					Vouchers []struct {
						ID    string `json:"id"`
						Title string `json:"title"`
						Kind  string `json:"kind"`
						Stock *int   `json:"stock"`
					} `json:"vouchers"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"shops"`
	}
	s.gql("", `{ shops(first: 10) { edges { node { name vouchers { id title kind stock } } } } }`, nil, &withVouchers)
	var seckill, normal bool
	for _, e := range withVouchers.Shops.Edges {
		for _, v := range e.Node.Vouchers {
			switch {
			case v.Kind == "SECKILL" && v.Title == "100元代金券":
				if v.Stock == nil || *v.Stock != 100 {
					t.Errorf("seckill voucher %s of %s: stock %v, want 100", v.ID, e.Node.Name, v.Stock)
				}
				seckill = true
			case v.Kind == "NORMAL" && v.Title == "50元代金券":
				normal = true
			}
		}
	}
	if !seckill || !normal {
		t.Fatalf("demo vouchers: seckill 100元代金券 found %v, normal 50元代金券 found %v; shops: %+v",
			seckill, normal, withVouchers.Shops.Edges)
	}

	// Dev login as the default admin.
	var sent struct {
		SendLoginCode struct {
			DevCode *string `json:"devCode"`
		} `json:"sendLoginCode"`
	}
	s.gql("", `mutation ($phone: String!) { sendLoginCode(phone: $phone) { devCode } }`,
		map[string]any{"phone": adminPhone}, &sent)
	if sent.SendLoginCode.DevCode == nil || len(*sent.SendLoginCode.DevCode) != 6 {
		t.Fatalf("sendLoginCode in dev mode: devCode %v, want a 6-digit code", sent.SendLoginCode.DevCode)
	}
	var login struct {
		Login struct {
			Token string `json:"token"`
			User  struct{ ID, Role string }
		} `json:"login"`
	}
	s.gql("", `mutation ($phone: String!, $code: String!) { login(phone: $phone, code: $code) { token user { id role } } }`,
		map[string]any{"phone": adminPhone, "code": *sent.SendLoginCode.DevCode}, &login)
	token := login.Login.Token
	if token == "" || login.Login.User.Role != "ADMIN" {
		t.Fatalf("login as %s: %+v, want a token and role ADMIN", adminPhone, login.Login)
	}
	var me struct {
		Me *struct{ ID, Phone, Role string } `json:"me"`
	}
	s.gql(token, `{ me { id phone role } }`, nil, &me)
	if me.Me == nil || me.Me.Role != "ADMIN" || me.Me.Phone != adminPhone || me.Me.ID != login.Login.User.ID {
		t.Fatalf("me with the admin token: %+v, want %s role ADMIN id %s", me.Me, adminPhone, login.Login.User.ID)
	}

	// An admin mutation.
	const shopName = "冒烟测试小馆"
	var created struct {
		CreateShop struct {
			ID   string `json:"id"`
			Name string `json:"name"`
			Type struct{ Name string }
		} `json:"createShop"`
	}
	s.gql(token, `mutation ($in: CreateShopInput!) { createShop(input: $in) { id name type { name } } }`,
		map[string]any{"in": map[string]any{
			"name": shopName, "typeID": foodType, "longitude": 120.15, "latitude": 30.31,
			"area": "大关", "address": "测试路1号", "avgPrice": 5000,
		}}, &created)
	shopID := created.CreateShop.ID
	if shopID == "" || created.CreateShop.Name != shopName || created.CreateShop.Type.Name != "美食" {
		t.Fatalf("createShop: %+v", created.CreateShop)
	}
	s.gql("", shopsQuery, map[string]any{"first": 1}, &page)
	if page.Shops.TotalCount != 11 {
		t.Fatalf("after createShop: totalCount %d, want 11", page.Shops.TotalCount)
	}

	// Metrics of the operations above.
	code, body = s.get("metrics")
	if code != http.StatusOK || !strings.Contains(body, "surge_graphql_operations_total") {
		t.Fatalf("/metrics: %d, surge_graphql_operations_total present: %v", code,
			strings.Contains(body, "surge_graphql_operations_total"))
	}

	s.stop()

	// Restart on the same data: the new shop is there and nothing is seeded again.
	s2 := startServer(t, dataDir)
	t.Logf("startup (restart, existing data): %v", s2.startup.Round(time.Millisecond))
	var got struct {
		Shop *struct{ ID, Name string } `json:"shop"`
	}
	s2.gql("", `query ($id: ID!) { shop(id: $id) { id name } }`, map[string]any{"id": shopID}, &got)
	if got.Shop == nil || got.Shop.Name != shopName {
		t.Fatalf("after restart: shop(id: %s) = %+v, want %s", shopID, got.Shop, shopName)
	}
	s2.gql("", shopsQuery, map[string]any{"first": 3}, &page)
	if page.Shops.TotalCount != 11 {
		t.Fatalf("after restart: shops totalCount %d, want 11 (re-seeded?)", page.Shops.TotalCount)
	}
	s2.gql("", `{ shopTypes { id name } }`, nil, &types)
	if len(types.ShopTypes) != 10 {
		t.Fatalf("after restart: %d shop types, want 10 (re-seeded?)", len(types.ShopTypes))
	}
	s2.stop()
}

func TestPlaygroundInChromium(t *testing.T) {
	if _, err := browsertest.Chromium(); err != nil {
		if testing.Short() && errors.Is(err, browsertest.ErrNoChromium) {
			t.Skipf("-short and %v", err)
		}
		t.Fatalf("%v (or run go test -short to skip this test)", err)
	}
	s := startServer(t, t.TempDir())
	t.Logf("startup: %v", s.startup.Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	result, requested, err := browsertest.RunPlaygroundQuery(ctx, s.base, "{ shopTypes { name } }")
	t.Logf("playground query in Chromium: %v, %d requests", time.Since(start).Round(time.Millisecond), len(requested))
	if err != nil {
		t.Fatalf("RunPlaygroundQuery: %v\nrequested: %q", err, requested)
	}
	if !strings.Contains(result, "美食") {
		t.Errorf("response pane does not contain 美食:\n%s", result)
	}
	if len(requested) == 0 || !strings.HasPrefix(requested[0], s.base) {
		t.Errorf("requested URLs %q: want the page %s first", requested, s.base)
	}
	for _, u := range requested {
		switch {
		case strings.HasPrefix(u, s.base),
			strings.HasPrefix(u, "data:"), strings.HasPrefix(u, "blob:"), strings.HasPrefix(u, "about:"):
		default:
			t.Errorf("the page requested %s, outside %s", u, s.base)
		}
	}
	s.stop()
}
