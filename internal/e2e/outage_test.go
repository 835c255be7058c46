package e2e_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/surgekit/surge/internal/store"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/testenv"
)

// behindProxy returns a MySQL DSN for a fresh test database that goes through a proxy the test
// can cut, and that proxy.
func behindProxy(t *testing.T) (string, *testenv.Proxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, cfg.Addr)
	cfg.Addr = p.Addr
	return cfg.FormatDSN(), p
}

// TestGrabPayloadNeedsNoSecondRead: a successful grab answers its order (id, status,
// createdAt) from what the grab itself decided. It used to read the order back from the
// database and Redis, so that under load (MariaDB out of connections) an admitted grab came
// back as data.seckillVoucher.orderId plus errors[INTERNAL] at seckillVoucher.order. Here the
// database is unreachable during the grab, which admission does not need.
func TestGrabPayloadNeedsNoSecondRead(t *testing.T) {
	dsn, db := behindProxy(t)
	e := start(t, func(c *app.Config) { c.MySQLDSN = dsn })
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "Under load", 5)
	u := e.login(testenv.Phone())

	db.Cut()
	r := e.do(u, `mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId status order { id status createdAt } } }`,
		map[string]any{"v": v})
	db.Restore(t)
	if len(r.Errors) > 0 {
		t.Fatalf("admitted grab with the database unreachable: %s", r.Raw)
	}
	id := str(r.Data, "seckillVoucher", "orderId")
	if id == "" || str(r.Data, "seckillVoucher", "order", "id") != id ||
		str(r.Data, "seckillVoucher", "order", "status") != "QUEUED" || str(r.Data, "seckillVoucher", "order", "createdAt") == "" {
		t.Fatalf("grab payload = %s", r.Raw)
	}
	// The order is the user's, and becomes CREATED once the database is back.
	e.waitOrder(u, id, "CREATED", 10*time.Second)
}

// mariaDB151 is a private MariaDB with the stock max_connections (151), and a root pool to
// watch it.
func mariaDB151(t *testing.T) (*testenv.MariaDB, *sql.DB) {
	t.Helper()
	m := testenv.PrivateMySQL(t)
	root := m.Root(t)
	root.SetMaxOpenConns(1)
	if _, err := root.Exec("SET GLOBAL max_connections = 151"); err != nil {
		t.Fatal(err)
	}
	return m, root
}

func globalStatus(t *testing.T, root *sql.DB, name string) int {
	t.Helper()
	var k string
	var v int
	if err := root.QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&k, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestThreeServersFitDefaultMaxConnections: three servers with the default configuration,
// each with its database pool in full use, stay within MariaDB's default max_connections
// (151) with room left for one more pool (the test suite's, a tool's); with 64 connections
// per server they exceeded it and grabs failed with "Too many connections".
func TestThreeServersFitDefaultMaxConnections(t *testing.T) {
	m, root := mariaDB151(t)
	e := start(t, func(c *app.Config) { c.MySQLDSN = m.DSN; c.MySQLMaxConns = store.DefaultMaxConns }) // not the suite's budget
	servers := []*env{e, e.another(), e.another()}
	if _, err := root.Exec("FLUSH STATUS"); err != nil { // resets Max_used_connections
		t.Fatal(err)
	}
	perServer := e.app.DB.SQL.Stats().MaxOpenConnections
	if perServer <= 0 {
		t.Fatal("the database pool is unbounded")
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for _, s := range servers {
		for range 2 * perServer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.app.DB.SQL.Exec("DO SLEEP(0.3)"); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}()
		}
	}
	wg.Wait()
	used := globalStatus(t, root, "Max_used_connections")
	t.Logf("%d connections per server; MariaDB saw at most %d at once", perServer, used)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d queries failed with every pool in use (first: %v); MariaDB saw %d connections", n, firstErr.Load(), used)
	}
	if used+perServer > 151 {
		t.Fatalf("three servers used %d connections: no room left for one more pool of %d (the test suite's, a tool's)", used, perServer)
	}
}

// TestDatabaseOutOfConnectionsIsUnavailable: when MariaDB refuses connections ("Too many
// connections"), requests are answered UNAVAILABLE (retry shortly), never INTERNAL.
func TestDatabaseOutOfConnectionsIsUnavailable(t *testing.T) {
	m, root := mariaDB151(t)
	// The default pool, not the suite's budget: the server must want more connections than
	// MariaDB gives (its private server shares nothing).
	e := start(t, func(c *app.Config) { c.MySQLDSN = m.DSN; c.MySQLMaxConns = store.DefaultMaxConns })
	_, shopID := firstTypeAndShop(e)
	if _, err := root.Exec(fmt.Sprintf("SET GLOBAL max_connections = %d", globalStatus(t, root, "Threads_connected"))); err != nil {
		t.Fatal(err)
	}
	defer root.Exec("SET GLOBAL max_connections = 151")
	const concurrent = 40
	codes := make([]string, concurrent)
	var wg sync.WaitGroup
	for i := range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do("", `query($s: ID!) { vouchers(shopId: $s) { id } }`, map[string]any{"s": shopID})
			codes[i] = r.code()
			if c := r.code(); c != "" && c != "UNAVAILABLE" {
				t.Errorf("out of connections: %s", r.Raw)
			} else if c == "UNAVAILABLE" && !strings.Contains(r.Errors[0].Message, "retry") {
				t.Errorf("UNAVAILABLE does not say to retry: %s", r.Raw)
			}
		}()
	}
	wg.Wait()
	if !slices.Contains(codes, "UNAVAILABLE") {
		t.Fatalf("%d concurrent reads with no connection to spare were all served: %v", concurrent, codes)
	}
}

// TestSessionStoreOutageIsUnavailable: while Redis is down (here: killed, then restarted), a
// request with a token is answered with a GraphQL error UNAVAILABLE, HTTP 503 and
// Retry-After, in the response type the client asked for (it used to be a text/plain 503
// "session store unavailable"); an operation over a WebSocket gets UNAVAILABLE. Fields that
// need Redis answer UNAVAILABLE too.
func TestSessionStoreOutageIsUnavailable(t *testing.T) {
	redisSrv := testenv.StartRedis(t)
	// No session cache: a session read from Redis is otherwise answered from memory for
	// SURGE_SESSION_CACHE (1 s), outage or not.
	e := start(t, func(c *app.Config) { c.RedisAddrs, c.SessionCache = []string{redisSrv.Addr}, 0 })
	u := e.login(testenv.Phone())
	ws := e.ws(map[string]any{"Authorization": "Bearer " + u}, nil)
	redisSrv.Kill()

	// Over a WebSocket, each operation re-checks the session: UNAVAILABLE too.
	ws.subscribe("1", `{ me { id } }`, nil)
	if err := ws.nextError("1"); code(err) != "UNAVAILABLE" {
		t.Fatalf("operation over a WebSocket with Redis down: %+v, want UNAVAILABLE", err)
	}

	for _, accept := range []string{"", "application/json", "application/graphql-response+json"} {
		body, _ := json.Marshal(map[string]any{"query": `{ me { id } }`})
		req, _ := http.NewRequest(http.MethodPost, e.url+"/query", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+u)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := accept
		if want == "" {
			want = "application/graphql-response+json"
		}
		var r struct {
			Data   any        `json:"data"`
			Errors []gqlError `json:"errors"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || len(r.Errors) != 1 || r.Data != nil {
			t.Fatalf("Accept %q: not a GraphQL error response (%d %s): %s", accept, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) ||
			resp.Header.Get("Retry-After") == "" || r.Errors[0].Extensions["code"] != "UNAVAILABLE" {
			t.Fatalf("Accept %q: %d %s Retry-After %q: %s", accept, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), raw)
		}
	}
	// Without a token the request runs; what needs Redis is UNAVAILABLE, not INTERNAL.
	r := e.wantCode("UNAVAILABLE", "", `mutation($p: String!) { sendLoginCode(phone: $p) { expiresIn } }`, map[string]any{"p": testenv.Phone()})
	mustContain(t, r.Errors[0].Message, "retry")

	// Redis back (empty: no persistence): once the client reconnects (it retries dialling
	// every second), the token is unknown and the request anonymous.
	redisSrv.Start()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := e.do(u, `{ me { id } }`, nil)
		if r.Status == http.StatusOK {
			if len(r.Errors) > 0 || get(r.Data, "me") != nil {
				t.Fatalf("after the restart: %s", r.Raw)
			}
			break
		}
		if r.code() != "UNAVAILABLE" || time.Now().After(deadline) {
			t.Fatalf("5 s after Redis came back: %d %s", r.Status, r.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
