package e2e_test

// Issue 12, replayed: real `surge serve` processes (the built binary), a production-mode one on
// real Redis and MariaDB and the embedded default, attacked the way a hostile client would.
// Each subtest names the item of the issue it covers. The server's CPU time per request is read
// from /proc, so "answered within 100 ms of server CPU" is measured, not guessed.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveSurgeBinary()
	os.Exit(code)
}

const (
	graphqlResponseJSON = "application/graphql-response+json"
	// maxCPUPerRequest is the target: any body up to 1 MiB answered or refused within
	// 100 ms of server CPU. /proc counts CPU in 10 ms ticks, hence the one tick of slack.
	maxCPUPerRequest = 100*time.Millisecond + 10*time.Millisecond
	maxErrorBody     = 16 << 10 // no answer echoes a hostile input: at most 20 errors of 300 bytes
	hostileTimeout   = 5 * time.Second
)

// surgeProc is one running `surge serve` child process.
type surgeProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:PORT
	ns     string // its SURGE_NAMESPACE
	stderr *testenv.SyncBuffer
	done   chan struct{}
}

var playgroundLine = regexp.MustCompile(`^surge: playground at http://(\S+)/$`)

// startSurge runs the binary with a clean environment plus vars, on 127.0.0.1:0, and waits
// until /healthz answers 200. The process is killed at cleanup; its stderr is logged on failure.
func startSurge(t *testing.T, vars map[string]string) *surgeProc {
	t.Helper()
	p := &surgeProc{t: t, ns: vars["SURGE_NAMESPACE"], stderr: &testenv.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(testenv.SurgeBinary(t))
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"SURGE_ADDR=127.0.0.1:0", "SURGE_DATA_DIR=" + t.TempDir()}
	for k, v := range vars {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("stderr of surge (pid %d), last 4 KiB:\n%s", p.cmd.Process.Pid, tail(p.stderr.String(), 4<<10))
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := playgroundLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		p.url = "http://" + strings.Replace(a, "localhost", "127.0.0.1", 1)
	case <-p.done:
		t.Fatalf("surge exited at start:\n%s", p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("surge printed no URL within 30 s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz not 200 within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// cpu is the process's user+system CPU time so far (/proc/PID/stat, 100 ticks per second).
func (p *surgeProc) cpu() time.Duration {
	p.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		p.t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start at ") ".
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// rss is the process's resident memory (/proc/PID/status VmRSS).
func (p *surgeProc) rss() int64 {
	p.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	p.t.Fatal("no VmRSS")
	return 0
}

// errorLines returns the server's log lines at level ERROR.
func (p *surgeProc) errorLines() []string {
	var out []string
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}

// logins names the process's login keys in Redis.
func (p *surgeProc) logins() auth.Keyspace { return auth.KeysIn(p.ns) }

// client returns the e2e helpers (do, send, ws…) bound to this process.
func (p *surgeProc) client() *env { return &env{t: p.t, url: p.url} }

// answer is one raw HTTP exchange.
type answer struct {
	status      int
	contentType string
	body        []byte
	cpu         time.Duration // server CPU spent while the request ran
	took        time.Duration
	err         error // transport error (timeout, reset)
}

func (a answer) decode() (map[string]json.RawMessage, []gqlError) {
	var top map[string]json.RawMessage
	if json.Unmarshal(a.body, &top) != nil {
		return nil, nil
	}
	var errs []gqlError
	_ = json.Unmarshal(top["errors"], &errs)
	return top, errs
}

func (a answer) code() string {
	_, errs := a.decode()
	if len(errs) == 0 {
		return ""
	}
	c, _ := errs[0].Extensions["code"].(string)
	return c
}

func (a answer) String() string {
	return fmt.Sprintf("%d %s (%v, cpu %v, err %v): %s", a.status, a.contentType, a.took.Round(time.Millisecond),
		a.cpu, a.err, tail(string(a.body), 300))
}

// exchange sends req and measures the server CPU it cost.
func (p *surgeProc) exchange(req *http.Request, timeout time.Duration) answer {
	p.t.Helper()
	before, start := p.cpu(), time.Now()
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	a := answer{err: err}
	if err == nil {
		a.status, a.contentType = resp.StatusCode, resp.Header.Get("Content-Type")
		a.body, a.err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	a.took, a.cpu = time.Since(start), p.cpu()-before
	return a
}

// post sends body to /query as JSON, asking for application/graphql-response+json (with it,
// request errors are 4xx as the GraphQL-over-HTTP spec describes).
func (p *surgeProc) post(body []byte, header ...string) answer {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url+"/query", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", graphqlResponseJSON)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return p.exchange(req, hostileTimeout)
}

func gqlBody(query string, vars map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return b
}

// nested repeats open n times, puts middle inside and closes it n times.
func nested(open, middle, closer string, n int) string {
	return strings.Repeat(open, n) + middle + strings.Repeat(closer, n)
}

// productionVars configures a production-mode server on the shared Redis and a fresh MariaDB
// database, under a namespace of its own (deleted at cleanup).
func productionVars(t *testing.T, admin string) map[string]string {
	t.Helper()
	return map[string]string{
		"SURGE_NAMESPACE":       testNamespace(t, testenv.Redis(t)),
		"SURGE_REDIS_ADDRS":     testenv.RedisAddr(),
		"SURGE_MYSQL_DSN":       testenv.MySQL(t),
		"SURGE_MYSQL_MAX_CONNS": strconv.Itoa(testenv.MySQLConns()),
		"SURGE_MODE":            "production",
		"SURGE_ADMIN_PHONES":    admin,
		"SURGE_SEED":            "true",
		// Tests share 127.0.0.1 and one Redis: per-client send limits are tested with a proxy
		// header of their own (item 3), not on the shared loopback address.
		"SURGE_LOGIN_SEND_RATE_IP": "off",
	}
}

func TestHostileClients(t *testing.T) {
	admin := testenv.Phone()
	prod := startSurge(t, productionVars(t, admin))
	embedded := startSurge(t, nil)
	servers := map[string]*surgeProc{"production": prod, "embedded": embedded}

	// Item 2: bounded documents and variables, before parse and validation.
	for name, p := range servers {
		t.Run("item2/bounded-documents/"+name, func(t *testing.T) { p.t = t; attackDocuments(t, p) })
	}
	t.Run("item2/request-deadline", testRequestDeadline)
	t.Run("item2/slow-body", testSlowBody)

	// Item 5: client mistakes are 4xx with a client code, never INTERNAL, never logged as ERROR.
	t.Run("item5/client-mistakes", func(t *testing.T) { prod.t = t; clientMistakes(t, prod, admin) })

	// Item 6: the GraphQL-over-HTTP audit, 0 errors and 0 warnings in both modes. Its
	// variables audits query __type, which production refuses unless introspection is on.
	t.Run("item6/graphql-http-audit/embedded", func(t *testing.T) { auditGraphQLOverHTTP(t, embedded.url+"/query") })
	t.Run("item6/graphql-http-audit/production", func(t *testing.T) {
		vars := productionVars(t, testenv.Phone())
		vars["SURGE_INTROSPECTION"] = "true"
		auditGraphQLOverHTTP(t, startSurge(t, vars).url+"/query")
	})

	// Item 3: SMS sends limited per operation, per client, globally; no day-long lockout.
	t.Run("item3/side-effects-per-operation", func(t *testing.T) { prod.t = t; sideEffectsPerOperation(t, prod) })
	t.Run("item3/send-rates", testSendRates)
	t.Run("item3/no-lockout-no-logged-codes", func(t *testing.T) { prod.t = t; noLockout(t, prod) })

	// Item 4: nodes and aliased lookups batched; amplification bounded.
	t.Run("item4/amplification", func(t *testing.T) { prod.t = t; amplification(t, prod) })

	// Item 7: WebSocket subscriptions per connection and connections per client.
	t.Run("item7/websocket-limits", func(t *testing.T) { prod.t = t; websocketLimits(t, prod) })

	for name, p := range servers {
		p.t = t
		if rss := p.rss(); rss > 256<<20 {
			t.Errorf("%s: RSS %d MiB after the attacks", name, rss>>20)
		}
		// A server that burned minutes on one request would not stop in time.
		start := time.Now()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			t.Logf("%s: stopped %v after SIGTERM", name, time.Since(start).Round(time.Millisecond))
		case <-time.After(5 * time.Second):
			t.Errorf("%s: still running 5 s after SIGTERM", name)
		}
	}
}

// hostileDocuments are the bodies of item 2 (and a few more of the same family), each at most
// 1 MiB.
func hostileDocuments() map[string][]byte {
	sameName := func(n int) string { // overlapping-fields validation is quadratic in these
		return "{ shops(first: 1) { edges { node {" + strings.Repeat(" id", n) + " } } } }"
	}
	q := func(query string) []byte { return gqlBody(query, nil) }
	aliases := func(n int, field func(i int) string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			b.WriteString(" " + field(i))
		}
		return b.String() + " }"
	}
	typename := func(n int) string { return aliases(n, func(i int) string { return fmt.Sprintf("a%d: __typename", i) }) }
	distinctFragments := func(n int) string {
		var b strings.Builder
		b.WriteString("{ shops(first: 1) { edges { node {")
		for i := range n {
			fmt.Fprintf(&b, " ...F%d", i)
		}
		b.WriteString(" } } } }")
		for i := range n {
			fmt.Fprintf(&b, " fragment F%d on Shop { id }", i)
		}
		return b.String()
	}
	docs := map[string][]byte{
		// Just inside the default limits (2000 tokens, 500 fields): validation's worst shapes.
		"at the limits: 166 same aliases": q(aliases(166, func(int) string { return `a: shop(id: "1") { id name }` })),
		"at the limits: 180 conflicting":  q(aliases(180, func(i int) string { return fmt.Sprintf(`a: shop(id: "%d") { id }`, i) })),
		"at the limits: 120 fragments":    q(distinctFragments(120)),
		"at the limits: 490 same fields":  q(sameName(490)),
		"not 10 000 deep (70 KB)":         q("{ shops(where: " + nested("{not: ", "{}", "}", 10_000) + ") { totalCount } }"),
		"not 100 000 deep (700 KB)":       q("{ shops(where: " + nested("{not: ", "{}", "}", 100_000) + ") { totalCount } }"),
		"nodes ids 100 000 deep":          q("{ nodes(ids: " + nested("[", `"1"`, "]", 100_000) + ") { id } }"),
		"selections 100 000 deep":         q(nested("{ a ", "", "}", 100_000)),
		"50 000 aliases":                  q(typename(50_000)),
		"1 000 same-name fields":          q(sameName(1_000)),
		"3 000 same-name fields":          q(sameName(3_000)),
		"10 000 same-name fields":         q(sameName(10_000)),
		"directives":                      q("{ __typename" + strings.Repeat(" @skip(if: false)", 50_000) + " }"),
		"fragment chain":                  fragmentChain(20_000),
		"1 MiB id literal":                q(`{ shop(id: "` + strings.Repeat("1", 1<<20-100) + `") { id } }`),
		"1 MiB comment":                   q("{ __typename }\n#" + strings.Repeat("x", 1<<20-100)),
		"60 000 ids literal":              q(`{ shops(where: {idIn: [` + strings.Repeat(`"4294967297", `, 60_000) + `]}) { totalCount } }`),
		"variables 100 000 deep": []byte(`{"query":"query($w: ShopWhereInput) { shops(where: $w) { totalCount } }","variables":{"w":` +
			nested(`{"not":`, "{}", "}", 100_000) + `}}`),
		"variables 9 000 deep": []byte(`{"query":"query($w: ShopWhereInput) { shops(where: $w) { totalCount } }","variables":{"w":` +
			nested(`{"not":`, "{}", "}", 9_000) + `}}`),
		"variables 70 000 ids": gqlBody(`query($w: ShopWhereInput) { shops(where: $w) { totalCount } }`,
			map[string]any{"w": map[string]any{"idIn": repeat("4294967297", 70_000)}}),
		"variables array 500 000 deep": []byte(`{"query":"query($ids: [ID!]!) { nodes(ids: $ids) { id } }","variables":{"ids":` +
			nested("[", "", "]", 500_000) + `}}`),
		"extensions 100 000 deep": []byte(`{"query":"{ __typename }","extensions":` + nested(`{"a":`, "1", "}", 100_000) + `}`),
		"body of brackets":        []byte(nested("[", "", "]", 500_000)),
		"1 MiB id variable": gqlBody(`query($id: ID!) { shop(id: $id) { id } }`,
			map[string]any{"id": strings.Repeat("1", 1<<20-100)}),
	}
	return docs
}

func fragmentChain(n int) []byte {
	var b strings.Builder
	b.WriteString("{ ...F0 }")
	for i := range n {
		fmt.Fprintf(&b, " fragment F%d on Query { __typename ...F%d }", i, i+1)
	}
	fmt.Fprintf(&b, " fragment F%d on Query { __typename }", n)
	return gqlBody(b.String(), nil)
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func attackDocuments(t *testing.T, p *surgeProc) {
	for name, body := range hostileDocuments() {
		if len(body) > 1<<20 {
			t.Fatalf("%s: %d bytes, the attack list is meant to stay within 1 MiB", name, len(body))
		}
		a := p.post(body)
		// A collection, or a background tick, that earlier requests' work started can land
		// in one request's window (a CPU profile of the server is not per request): a
		// document over the budget is measured twice more, and its cheapest run counts. A
		// document that costs more than the budget costs it every time.
		for try := 0; try < 2 && a.err == nil && a.cpu > maxCPUPerRequest; try++ {
			again := p.post(body)
			t.Logf("%s: %v of server CPU; measured again: %v", name, a.cpu, again.cpu)
			if again.err == nil && again.cpu < a.cpu {
				a = again
			}
		}
		switch {
		case a.err != nil:
			t.Errorf("%s (%d KB): no answer: %v", name, len(body)>>10, a)
		case a.cpu > maxCPUPerRequest:
			t.Errorf("%s (%d KB): %v of server CPU, want at most 100 ms: %v", name, len(body)>>10, a.cpu, a)
		case len(a.body) > maxErrorBody:
			t.Errorf("%s: the answer is %d bytes: it echoes the input: %v", name, len(a.body), a)
		case a.status >= 500:
			t.Errorf("%s: %v", name, a)
		case a.status != http.StatusOK && a.code() == "":
			t.Errorf("%s: refusal without extensions.code: %v", name, a)
		case a.code() == "INTERNAL":
			t.Errorf("%s: a hostile input answered INTERNAL: %v", name, a)
		default:
			t.Logf("%-28s %4d KB → %d %s in %v, cpu %v", name, len(body)>>10, a.status, a.code(), a.took.Round(time.Millisecond), a.cpu)
		}
	}
}

// testRequestDeadline: with Redis frozen (SIGSTOP), a request is answered at its deadline
// (SURGE_REQUEST_TIMEOUT) instead of waiting for the Redis client's own timeouts and retries.
func testRequestDeadline(t *testing.T) {
	redisSrv := testenv.StartRedis(t)
	vars := productionVars(t, testenv.Phone())
	vars["SURGE_REDIS_ADDRS"] = redisSrv.Addr
	vars["SURGE_REQUEST_TIMEOUT"] = "1s"
	p := startSurge(t, vars)
	p.post(gqlBody(`{ shopTypes { id } }`, nil)) // warm connections
	redisSrv.Freeze()
	defer redisSrv.Thaw()
	a := p.post(gqlBody(`{ shopTypes { id } shop(id: "4294967297") { id } }`, nil))
	if a.err != nil || a.took > 2500*time.Millisecond {
		t.Fatalf("with Redis frozen and a 1 s request deadline: %v", a)
	}
	if c := a.code(); c != "TIMEOUT" && c != "INTERNAL" {
		t.Fatalf("answer at the deadline has code %q: %v", c, a)
	}
	t.Logf("frozen Redis: answered in %v: %s", a.took.Round(time.Millisecond), a.code())
}

// testSlowBody: a body trickled byte by byte is cut off at SURGE_READ_TIMEOUT.
func testSlowBody(t *testing.T) {
	vars := productionVars(t, testenv.Phone())
	vars["SURGE_READ_TIMEOUT"] = "1s"
	p := startSurge(t, vars)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"query":"{ __typename }"}` + strings.Repeat(" ", 74)
	fmt.Fprintf(conn, "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	start := time.Now()
	for i := 0; i < len(body); i++ {
		if _, err := conn.Write([]byte{body[i]}); err != nil {
			t.Logf("write refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
			return
		}
		if time.Since(start) > 4*time.Second {
			t.Fatalf("the server still reads a trickled body after %v (SURGE_READ_TIMEOUT=1s)", time.Since(start).Round(time.Millisecond))
		}
		// A closed connection shows as a read that ends at once.
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := conn.Read(make([]byte, 512)); n > 0 || (err != nil && !isTimeout(err)) {
			t.Logf("connection answered/closed after %v (%d bytes, %v)", time.Since(start).Round(time.Millisecond), n, err)
			return
		}
	}
	t.Fatalf("a 100-byte body trickled over %v was read to the end", time.Since(start).Round(time.Millisecond))
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// clientMistakes replays what fuzzing found answered INTERNAL (item 5).
func clientMistakes(t *testing.T, p *surgeProc, admin string) {
	requestErrors := map[string][]byte{
		"invalid JSON":          []byte(`{"query": "{ __typename }"`),
		"empty body":            nil,
		"variables array":       []byte(`{"query":"{ __typename }","variables":[1]}`),
		"query number":          []byte(`{"query":123}`),
		"UTF-8 BOM":             append([]byte("\xef\xbb\xbf"), `{"query":"{ __typename }"}`...),
		"duplicate query key":   []byte(`{"query":"{ __typename }","query":"mutation { logout }"}`),
		"duplicate nested key":  []byte(`{"query":"query($id: ID!) { shop(id: $id) { id } }","variables":{"id":"1","id":"2"}}`),
		"trailing garbage":      []byte(`{"query":"{ __typename }"} {"query":"mutation { logout }"}`),
		"operationName number":  []byte(`{"query":"{ __typename }","operationName":1}`),
		"extensions string":     []byte(`{"query":"{ __typename }","extensions":"x"}`),
		"query missing":         []byte(`{"variables":{}}`),
		"invalid UTF-8 in JSON": []byte("{\"query\":\"{ __typename \xff}\"}"),
	}
	for name, body := range requestErrors {
		a := p.post(body)
		top, _ := a.decode()
		_, hasData := top["data"]
		if a.status != http.StatusBadRequest || a.code() != "BAD_REQUEST" || hasData {
			t.Errorf("%s: %v; want 400 BAD_REQUEST and no data entry", name, a)
		}
	}

	// A JSON array is a batch: refused while batching is off, once for each of its operations
	// (issue 13: Apollo's BatchHttpLink shows the refusal of each).
	a := p.post([]byte(`[{"query":"{ __typename }"}]`))
	var batch []map[string]any
	if err := json.Unmarshal(a.body, &batch); err != nil || a.status != http.StatusBadRequest || len(batch) != 1 ||
		batch[0]["data"] != nil || !strings.Contains(string(a.body), `"BAD_REQUEST"`) {
		t.Errorf("JSON array: %v; want 400 and one BAD_REQUEST answer with no data entry", a)
	}

	// Chunked (no Content-Length) over 1 MiB: 413 like a declared one, not 200 + INTERNAL.
	big := gqlBody(`{ __typename }`, map[string]any{"pad": strings.Repeat("x", 1<<20)})
	req, _ := http.NewRequest(http.MethodPost, p.url+"/query", io.MultiReader(bytes.NewReader(big)))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	for name, r := range map[string]*http.Request{"chunked 1 MiB": req, "declared 1 MiB": mustRequest(http.MethodPost, p.url+"/query", big, "application/json")} {
		if a := p.exchange(r, hostileTimeout); a.status != http.StatusRequestEntityTooLarge || a.code() == "" {
			t.Errorf("%s: %v; want 413 with a code", name, a)
		}
	}
	for name, r := range map[string]*http.Request{
		"PUT":        mustRequest(http.MethodPut, p.url+"/query", []byte(`{"query":"{ __typename }"}`), "application/json"),
		"text/plain": mustRequest(http.MethodPost, p.url+"/query", []byte(`{"query":"{ __typename }"}`), "text/plain"),
	} {
		a := p.exchange(r, hostileTimeout)
		if (a.status != http.StatusMethodNotAllowed && a.status != http.StatusUnsupportedMediaType) || a.code() == "" {
			t.Errorf("%s: %v; want 405/415 as GraphQL JSON with extensions.code", name, a)
		}
	}

	// Validation: introspection is off in production and says so as a validation error; no
	// "Did you mean" anywhere.
	validation := map[string][]byte{
		"introspection __schema": gqlBody(`{ __schema { types { name } } }`, nil),
		"introspection __type":   gqlBody(`{ __type(name: "Query") { name } }`, nil),
		"unknown enum value":     gqlBody(`{ shops(orderBy: [{field: SCOR}]) { totalCount } }`, nil),
		"unknown argument":       gqlBody(`{ shops(firs: 1) { totalCount } }`, nil),
		"unknown input field":    gqlBody(`{ shops(where: {nam: "x"}) { totalCount } }`, nil),
		"unknown field":          gqlBody(`{ shopz { id } }`, nil),
		"unknown type":           gqlBody(`query($w: ShopWhereInpu) { shops(where: $w) { totalCount } }`, nil),
		"enum value variable": gqlBody(`query($o: [ShopOrder!]) { shops(orderBy: $o) { totalCount } }`,
			map[string]any{"o": []any{map[string]any{"field": "SCOR"}}}),
		"input field variable": gqlBody(`query($w: ShopWhereInput) { shops(where: $w) { totalCount } }`,
			map[string]any{"w": map[string]any{"nam": "x"}}),
		"Int over 32 bits": gqlBody(`{ shops(first: 3000000000) { totalCount } }`, nil),
	}
	for name, body := range validation {
		a := p.post(body)
		if a.status != http.StatusBadRequest || a.code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s: %v; want 400 GRAPHQL_VALIDATION_FAILED", name, a)
		}
		if bytes.Contains(a.body, []byte("Did you mean")) {
			t.Errorf("%s: a suggestion leaks the schema in production: %s", name, a.body)
		}
	}

	// Execution: bad arguments are BAD_USER_INPUT (HTTP 200, as the spec wants for field errors).
	execution := map[string][]byte{
		"first and last":          gqlBody(`{ shops(first: 2, last: 2) { totalCount } }`, nil),
		"tampered cursor":         gqlBody(`{ shops(after: "gqFpzwAAAAEAAAABoXaBoWEB", orderBy: [{field: SCORE}]) { edges { node { id } } } }`, nil),
		"cursor of another order": gqlBody(`{ shops(after: "gqFpzwAAAAEAAAABoXaSAQI") { edges { node { id } } } }`, nil),
		"garbage cursor":          gqlBody(`{ shops(after: "Zm9v") { edges { node { id } } } }`, nil),
		"empty not":               gqlBody(`{ shops(where: {not: {}}) { totalCount } }`, nil),
	}
	for name, body := range execution {
		if a := p.post(body); a.code() != "BAD_USER_INPUT" {
			t.Errorf("%s: %v; want BAD_USER_INPUT", name, a)
		}
	}

	// Out-of-range input as an admin: times past 2038 or before 1970 (MySQL TIMESTAMP), and
	// Ints past 32 bits, are refused rather than failing or stored wrong.
	token := loginFromRedis(t, p, admin)
	shopID := firstShop(t, p)
	create := `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { id beginAt endAt payValue } }`
	for name, in := range map[string]map[string]any{
		"beginAt 2039": {"beginAt": "2039-01-01T00:00:00Z", "endAt": "2040-01-01T00:00:00Z"},
		"year 1":       {"beginAt": "0001-01-01T00:00:00Z", "endAt": "2030-01-01T00:00:00Z"},
		"1969":         {"beginAt": "1969-12-31T00:00:00Z", "endAt": "2030-01-01T00:00:00Z"},
		"payValue 2^31": {"beginAt": "2030-01-01T00:00:00Z", "endAt": "2030-02-01T00:00:00Z",
			"payValue": 1 << 31},
	} {
		input := map[string]any{"shopID": shopID, "title": "t", "payValue": 1, "actualValue": 2, "kind": "SECKILL", "stock": 1}
		for k, v := range in {
			input[k] = v
		}
		body := gqlBody(create, map[string]any{"in": input})
		req := mustRequest(http.MethodPost, p.url+"/query", body, "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", graphqlResponseJSON)
		a := p.exchange(req, hostileTimeout)
		if c := a.code(); c != "BAD_USER_INPUT" && c != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("createVoucher %s: %v; want BAD_USER_INPUT", name, a)
		}
	}

	if lines := p.errorLines(); len(lines) > 0 {
		t.Errorf("client mistakes logged at ERROR (%d lines), first: %s", len(lines), lines[0])
	}
}

func mustRequest(method, url string, body []byte, contentType string) *http.Request {
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", graphqlResponseJSON)
	return req
}

// loginFromRedis logs phone in on a production server, reading the code where the server
// stored it (production sends codes through its CodeSender only).
func loginFromRedis(t *testing.T, p *surgeProc, phone string) string {
	t.Helper()
	c := p.client()
	c.ok("", `mutation($p: String!) { sendLoginCode(phone: $p) { expiresIn } }`, map[string]any{"p": phone})
	code := testenv.Redis(t).HGet(context.Background(), p.logins().Phone(phone)[0], "code").Val()
	d := c.ok("", `mutation($p: String!, $c: String!) { login(phone: $p, code: $c) { token } }`, map[string]any{"p": phone, "c": code})
	return str(d, "login", "token")
}

func firstShop(t *testing.T, p *surgeProc) string {
	t.Helper()
	return str(p.client().ok("", `{ shops(first: 1) { edges { node { id } } } }`, nil), "shops", "edges", 0, "node", "id")
}

// auditGraphQLOverHTTP runs graphql-http's serverAudits (the GraphQL-over-HTTP spec's
// reference suite, an npm package installed once by scripts/ensure-graphql-http.sh).
func auditGraphQLOverHTTP(t *testing.T, url string) {
	out, err := exec.Command("bash", "../../scripts/ensure-graphql-http.sh").Output()
	if err != nil {
		t.Fatalf("scripts/ensure-graphql-http.sh: %v %s", err, exitStderr(err))
	}
	dir := strings.TrimPrefix(strings.TrimSpace(string(out)), "SURGE_GRAPHQL_HTTP_DIR=")
	cmd := exec.Command("node", "../../scripts/graphql-http-audit.mjs", url)
	cmd.Env = append(os.Environ(), "SURGE_GRAPHQL_HTTP_DIR="+dir)
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("graphql-http audit: %v %s", err, exitStderr(err))
	}
	var res struct {
		OK, Notice, Warn, Error int
		Results                 []struct {
			ID, Name, Status, Reason string
			Response                 any
		}
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("audit output %s: %v", raw, err)
	}
	for _, r := range res.Results {
		if r.Status == "warn" || r.Status == "error" {
			t.Errorf("%s %s %s: %s (%v)", r.Status, r.ID, r.Name, r.Reason, r.Response)
		}
	}
	t.Logf("graphql-http audit: %d ok, %d notices, %d warnings, %d errors", res.OK, res.Notice, res.Warn, res.Error)
	if res.OK == 0 {
		t.Fatal("the audit ran nothing")
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// sideEffectsPerOperation: one request may not send a code to 1 400 phones, nor log in or grab
// twice (item 3).
func sideEffectsPerOperation(t *testing.T, p *surgeProc) {
	phones := make([]string, 1400)
	var b strings.Builder
	b.WriteString("mutation {")
	for i := range phones {
		phones[i] = testenv.Phone()
		fmt.Fprintf(&b, " s%d: sendLoginCode(phone: %q) { expiresIn }", i, phones[i])
	}
	b.WriteString(" }")
	a := p.post(gqlBody(b.String(), nil))
	if a.status == http.StatusOK || a.code() == "" {
		t.Errorf("1 400 aliased sendLoginCode: %v; want a refusal", a)
	}
	rdb := testenv.Redis(t)
	sent := 0
	for _, ph := range phones {
		sent += int(rdb.Exists(context.Background(), p.logins().Phone(ph)[0]).Val())
	}
	if sent > 1 {
		t.Errorf("one request sent %d login codes", sent)
	}
	for name, q := range map[string]string{
		"two logins": `mutation { a: login(phone: "13800000001", code: "123456") { token } b: login(phone: "13800000002", code: "123456") { token } }`,
		"two grabs":  `mutation { a: seckillVoucher(voucherId: "17179869186") { orderId } b: seckillVoucher(voucherId: "17179869186") { orderId } }`,
		"send and login through a fragment": `mutation { ...M sendLoginCode(phone: "19900000000") { expiresIn } } ` +
			`fragment M on Mutation { login(phone: "19900000000", code: "123456") { token } }`,
	} {
		if a := p.post(gqlBody(q, nil)); a.status == http.StatusOK || a.code() == "" {
			t.Errorf("%s in one request: %v; want a refusal", name, a)
		}
	}
}

// testSendRates: per-client (behind a trusted proxy header) and global send rates (item 3).
func testSendRates(t *testing.T) {
	vars := productionVars(t, testenv.Phone())
	vars["SURGE_TRUSTED_PROXY_HEADER"] = "X-Client-Address"
	vars["SURGE_LOGIN_SEND_RATE_IP"] = "3/1m"
	vars["SURGE_LOGIN_SEND_RATE_NEW"] = "8/1m" // the phones are new: their window, not returning users'
	p := startSurge(t, vars)
	send := func(ip string) answer {
		return p.post(gqlBody(`mutation($p: String!) { sendLoginCode(phone: $p) { expiresIn } }`, map[string]any{"p": testenv.Phone()}),
			"X-Client-Address", ip, "X-Forwarded-For", randomIP())
	}
	ip := randomIP()
	for i := range 3 {
		if a := send(ip); a.status != http.StatusOK || a.code() != "" {
			t.Fatalf("send %d from %s: %v", i+1, ip, a)
		}
	}
	a := send(ip)
	if a.code() != "RATE_LIMITED" {
		t.Fatalf("4th send from one client within a minute: %v; want RATE_LIMITED", a)
	}
	perClient := a.String()
	// Other clients go on until the deployment's limit: 8 sends in its namespace, counted by no
	// other server on this Redis (the 4th send above was refused per client, before counting).
	for i := 4; i <= 8; i++ {
		if a := send(randomIP()); a.status != http.StatusOK || a.code() != "" {
			t.Fatalf("send %d from a fresh client, within the global limit of 8: %v", i, a)
		}
	}
	a = send(randomIP())
	if a.code() != "RATE_LIMITED" || a.String() == perClient || !strings.Contains(string(a.body), "server-wide") {
		t.Fatalf("9th send: %v; want the global limit of 8 per minute", a)
	}
}

func randomIP() string {
	return fmt.Sprintf("10.%d.%d.%d", rand.IntN(256), rand.IntN(256), 1+rand.IntN(254))
}

// noLockout: an attacker who sends code after code to a phone (each cooldown waited out, here
// by deleting it) and burns each code with wrong guesses cannot lock its owner out for a day:
// past the phone's 10 wrong tries of the day each code allows one try, and the owner's right
// code still logs in (issue 23 item 6). Production logs no code (item 3).
func noLockout(t *testing.T, p *surgeProc) {
	phone := testenv.Phone()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	keys := p.logins().Phone(phone)
	t.Cleanup(func() { rdb.Del(context.Background(), keys...) })
	c := p.client()
	send := `mutation($p: String!) { sendLoginCode(phone: $p) { retryAfter } }`
	wrong := `mutation($p: String!) { login(phone: $p, code: "000000") { token } }`
	var codes []string
	for i := range 15 {
		r := c.do("", send, map[string]any{"p": phone})
		if r.code() == "RATE_LIMITED" {
			t.Fatalf("send %d after the cooldown was waited out: %s", i+1, r.Raw)
		}
		if wait := get(r.Data, "sendLoginCode", "retryAfter").(float64); wait > 15*60 {
			t.Fatalf("send %d: the next send waits %v s; an attacker can lock the owner out that long", i+1, wait)
		}
		codes = append(codes, rdb.HGet(ctx, keys[0], "code").Val())
		for range 5 {
			c.do("", wrong, map[string]any{"p": phone})
		}
		rdb.Del(ctx, keys[1]) // the cooldown has passed
	}
	if n, _ := rdb.Get(ctx, keys[3]).Int(); n != 10+13 {
		t.Errorf("%d wrong tries counted for the phone; want 10 at 5 per code, then one per code: 23", n)
	}
	c.ok("", send, map[string]any{"p": phone})
	owner := `mutation($p: String!, $c: String!) { login(phone: $p, code: $c) { token } }`
	c.ok("", owner, map[string]any{"p": phone, "c": rdb.HGet(ctx, keys[0], "code").Val()})
	logs := p.stderr.String()
	for _, code := range codes {
		if code != "" && code != "000000" && strings.Contains(logs, code) {
			t.Fatalf("production logged a login code in plain text (%s)", code)
		}
	}
}

// amplification: nodes with 100 ids, aliased up to the complexity budget and past it (the
// issue's 29 aliases ran 2 927 queries), costs one query per table and alias (item 4).
func amplification(t *testing.T, p *surgeProc) {
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = strconv.Itoa(4294967297 + i) // shops, most of them absent
	}
	for _, n := range []int{19, 29} {
		var b strings.Builder
		b.WriteString("query($ids: [ID!]!) {")
		for i := range n {
			fmt.Fprintf(&b, " n%d: nodes(ids: $ids) { id }", i)
		}
		b.WriteString(" }")
		a := p.post(gqlBody(b.String(), map[string]any{"ids": ids}))
		if a.err != nil || a.status >= 500 {
			t.Fatalf("%d aliases of nodes(100 ids): %v", n, a)
		}
		t.Logf("%d × nodes(100 ids): %d %s in %v, server cpu %v", n, a.status, a.code(), a.took.Round(time.Millisecond), a.cpu)
		if a.cpu > maxCPUPerRequest {
			t.Errorf("%d × nodes(100 ids) cost %v of server CPU", n, a.cpu)
		}
	}
}

// websocketLimits: one anonymous connection cannot hold thousands of subscriptions, and one
// client cannot open unbounded connections (item 7).
func websocketLimits(t *testing.T, p *surgeProc) {
	c := p.client()
	voucherID := seckillVoucher(t, c)
	ws := c.ws(nil, nil)
	const tries = 50
	for i := range tries {
		ws.subscribe(strconv.Itoa(i), `subscription($v: ID!) { voucherStock(voucherId: $v) }`, map[string]any{"v": voucherID})
	}
	// The first message of each subscription says whether it was accepted (the stock) or
	// refused (an error); they arrive in any order.
	first := map[string]bool{}
	accepted, refused, acceptedID := 0, 0, ""
	timeout := time.After(10 * time.Second)
	for len(first) < tries {
		select {
		case m, ok := <-ws.msgs:
			if !ok {
				t.Fatalf("connection closed after %d first answers", len(first))
			}
			if first[m.ID] || m.Type == "complete" {
				continue
			}
			first[m.ID] = true
			if m.Type == "next" && !bytes.Contains(m.Payload, []byte(`"errors"`)) {
				accepted, acceptedID = accepted+1, m.ID
			} else {
				refused++
			}
		case <-timeout:
			t.Fatalf("%d of %d subscriptions answered within 10 s", len(first), tries)
		}
	}
	if accepted == 0 || accepted > 20 || refused == 0 {
		t.Errorf("50 subscriptions on one connection: %d accepted, %d refused; want a cap", accepted, refused)
	}
	t.Logf("subscriptions on one connection: %d accepted, %d refused", accepted, refused)
	// A completed subscription gives its slot back.
	ws.stop(acceptedID)
	ws.subscribe("again", `subscription($v: ID!) { voucherStock(voucherId: $v) }`, map[string]any{"v": voucherID})
	for deadline := time.After(10 * time.Second); ; {
		select {
		case m := <-ws.msgs:
			if m.ID != "again" {
				continue
			}
			if m.Type != "next" || bytes.Contains(m.Payload, []byte(`"errors"`)) {
				t.Fatalf("a subscription after one completed: %s %s", m.Type, m.Payload)
			}
		case <-deadline:
			t.Fatal("no answer to a subscription after one completed")
		}
		break
	}

	open := 0
	for range 100 {
		conn, resp, err := c.dialWS(nil)
		if err != nil {
			if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("connection %d refused without 429: %v %v", open+2, resp, err)
			}
			break
		}
		_ = conn
		open++
	}
	if open >= 100 {
		t.Errorf("one client opened %d WebSocket connections", open+1)
	}
	t.Logf("connections per client: %d accepted", open+1)
}

func seckillVoucher(t *testing.T, c *env) string {
	t.Helper()
	d := c.ok("", `{ shops(first: 20) { edges { node { vouchers { id kind } } } } }`, nil)
	for _, e := range list(d, "shops", "edges") {
		for _, v := range list(e, "node", "vouchers") {
			if str(v, "kind") == "SECKILL" {
				return str(v, "id")
			}
		}
	}
	t.Fatal("no seckill voucher seeded")
	return ""
}
