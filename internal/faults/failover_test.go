package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// Issue 34, items 1, 2 and 5: what the users of a sale see when the master holding its voucher
// dies (kill -9) or is failed over, on a Cluster whose masters have replicas and on a master
// watched by Sentinel.
const (
	// definiteWithin: from the replica's promotion on, grabs on every server are answered
	// definitively (admitted, ALREADY_PURCHASED, SOLD_OUT) again within this.
	definiteWithin = 2 * time.Second
	// clusterWritableDelay: a Cluster master that restarts answers CLUSTERDOWN for its first
	// 2 s (Redis's CLUSTER_WRITABLE_DELAY), whatever the clients do: added to definiteWithin
	// for a Cluster without replicas, whose dead master only comes back by a restart.
	clusterWritableDelay = 2 * time.Second
	// settledWithin: every order told before the promotion stands in the database (CREATED,
	// LOST or FAILED) within this of the promotion.
	settledWithin = 5 * time.Second
)

// TestFailoverMidSale: a sale served by two real surge processes, one running the order
// consumer and one not (SURGE_SECKILL_CONSUMER=false), on the Cluster with replicas and on the
// Sentinel setup; when a quarter of the stock is admitted the master holding the voucher is
// killed (kill -9); on the Cluster also after its replica was made to lag (frozen, its link cut,
// while up to 40 more orders were admitted: those not yet written are lost with the master). With
// SECKILL_FAULTS_LONG=1, also CLUSTER FAILOVER, SENTINEL FAILOVER, the lagging replica under
// Sentinel and, for comparison, the kill -9 of a Redis without replicas that restarts with its
// AOF (a single node, a Cluster of masters only: the "promotion" is the node answering again).
// Users keep grabbing, over HTTP, through both servers (each answer not definitive is
// retried). Then:
//   - on each server, no answer but a definitive one later than definiteWithin after the
//     replica's promotion (the time it first says role:master);
//   - every order told before the promotion stands in MySQL (CREATED, or LOST if the promotion
//     lost it) within settledWithin of it;
//   - the invariants: no oversell, no user with two live orders, no order id told to two users,
//     every told id answered CREATED, LOST or FAILED by order(id), never null.
func TestFailoverMidSale(t *testing.T) {
	replicaCluster := func(t testing.TB) faultTarget { return testenv.ReplicaCluster(t) }
	sentinel := func(t testing.TB) faultTarget { return testenv.Sentinel(t) }
	type failoverCase struct {
		name  string
		setup func(testing.TB) faultTarget
		fault fault
	}
	cases := []failoverCase{
		{"cluster/kill -9", replicaCluster, kill},
		{"sentinel/kill -9", sentinel, kill},
		{"cluster/lagging replica, kill -9", replicaCluster, lagThenKill},
	}
	if long() {
		cases = append(cases,
			failoverCase{"cluster/CLUSTER FAILOVER", replicaCluster, failover},
			failoverCase{"sentinel/SENTINEL FAILOVER", sentinel, failover},
			failoverCase{"sentinel/lagging replica, kill -9", sentinel, lagThenKill},
			// No replica: the figures of a restart, for comparison.
			failoverCase{"single node/kill -9, restarted", singleNode, kill},
			failoverCase{"cluster without replicas/kill -9, restarted", mastersOnly, kill})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { failoverMidSale(t, c.setup(t), c.fault) })
	}
}

// fault is what happens to the voucher's master.
type fault int

const (
	kill        fault = iota // kill -9
	failover                 // CLUSTER FAILOVER on its replica, or SENTINEL FAILOVER
	lagThenKill              // its replica lags (lagOrders admitted it does not get), then kill -9
)

// lagOrders is how many orders the master admits while its replica lags, before it is killed,
// unless lagFor passes first.
const (
	lagOrders = 40
	lagFor    = 250 * time.Millisecond
)

func failoverMidSale(t *testing.T, f faultTarget, how fault) {
	stock := pick(500, 2000)
	users := stock * 2
	rdb := f.Client(t)
	within := definiteWithin
	if r, ok := f.(*restarted); ok && r.cluster() {
		within += clusterWritableDelay
	}
	var env []string
	switch f := f.(type) {
	case *testenv.Failover:
		env = []string{"SURGE_REDIS_ADDRS=" + join(f.Addrs)}
		if f.Sentinel() {
			env = []string{"SURGE_REDIS_SENTINELS=" + join(f.Addrs), "SURGE_REDIS_MASTER=" + f.MasterName}
		}
	case *restarted:
		env = []string{"SURGE_REDIS_ADDRS=" + join(f.addrs)}
	}
	// The deployment's change events (live pushes) go over the voucher's master too: its
	// subscribers lose their connection with it (on the Cluster, a pub/sub connection is
	// made to the node of its channel's slot).
	nsFor := func(v int) string {
		voucherMaster, _ := f.MasterOf("{" + strconv.Itoa(v) + "}")
		for range 200 {
			ns := "faults" + testenv.Phone()
			if m, _ := f.MasterOf(seckill.KeyPrefix(ns, seckill.DefaultPrefix) + ":events"); m == voucherMaster {
				return ns
			}
		}
		t.Fatal("no namespace of 200 puts the events channel on the voucher's master")
		return ""
	}
	w := newWorldOn(t, testenv.MySQL(t), rdb, env, stock, users, nsFor)
	// Dev mode answers login codes (the users log in over HTTP); no demo data.
	dev := []string{"SURGE_MODE=dev", "SURGE_SEED=false", "SURGE_ACCESS_LOG=false"}
	servers := []*server{
		{name: "with consumer", proc: startSurge(t, append(w.env(true, defaultClaimIdle), dev...)...)},
		{name: "without consumer", proc: startSurge(t, append(w.env(false, defaultClaimIdle), dev...)...)},
	}
	start := time.Now()
	tokens := loginAll(t, servers, users)
	t.Logf("%d users logged in over HTTP in %v", users, time.Since(start).Round(time.Millisecond))

	master, replica := f.MasterOf(w.keys.Stock)
	var pushes []*stockWatch
	for _, s := range servers {
		pushes = append(pushes, s.watchStock(t, w.v))
	}
	tl := newTally()
	var killedAt, promotedAt time.Time
	var atFault int
	var lag int64
	stop := make(chan struct{})
	faulted := make(chan struct{})
	go func() {
		defer close(faulted)
		for tl.count() < stock/4 {
			time.Sleep(time.Millisecond)
		}
		resume := func() {}
		if how == lagThenKill {
			resume = f.Lag(master, replica)
			// Sentinel does not promote a replica it finds down (frozen past its
			// down-after-milliseconds, 1 s): the lag ends sooner.
			for n, began := tl.count(), time.Now(); tl.count() < n+lagOrders && time.Since(began) < lagFor; {
				time.Sleep(time.Millisecond)
			}
			lag = f.ReplicationOffset(master)
		}
		promoted := f.Promotion(replica, 30*time.Second)
		atFault, killedAt = tl.count(), time.Now()
		if how == failover {
			f.Failover(replica)
		} else {
			f.Kill(master)
		}
		resume()
		at, ok := <-promoted
		if !ok {
			t.Errorf("%s was not promoted within 30 s of the fault on %s", replica, master)
			close(stop)
			return
		}
		promotedAt = at
		if how == lagThenKill {
			lag -= f.ReplicationOffset(replica) // what it had from the master: its offset as promoted
		}
		settled := w.watchSettled(tl, at)
		time.Sleep(within + 2*time.Second) // grabs go on, measured
		close(stop)
		if d, ok := <-settled; !ok {
			t.Errorf("orders told before the promotion still not in MySQL %v after it", 3*settledWithin)
		} else if t.Logf("every order told before the promotion stood in MySQL %v after it", d.Round(time.Millisecond)); d > settledWithin {
			t.Errorf("orders told before the promotion stood in MySQL only %v after it, want within %v", d.Round(time.Millisecond), settledWithin)
		}
	}()
	w.grabOverHTTP(t, tl, servers, tokens, stop)
	<-faulted
	if promotedAt.IsZero() {
		t.FailNow()
	}
	what := map[fault]string{kill: "killed", failover: "failed over",
		lagThenKill: fmt.Sprintf("killed, its replica about %d bytes behind,", lag)}[how]
	if _, ok := f.(*restarted); ok {
		t.Logf("%s: the node %s of the voucher killed with %d admitted; it answered PING again %v later (restarted with its AOF: the promotion of the figures below)",
			f, master, atFault, promotedAt.Sub(killedAt).Round(time.Millisecond))
	} else {
		t.Logf("%s: master %s of the voucher %s with %d admitted; replica %s promoted %v later",
			f, master, what, atFault, replica, promotedAt.Sub(killedAt).Round(time.Millisecond))
	}
	for _, s := range servers {
		if !s.proc.alive() {
			t.Fatalf("surge %s exited: %v", s.name, s.proc.waitErr)
		}
		s.mu.Lock()
		last := s.lastIndefinite.Sub(promotedAt)
		if s.indefinite == 0 {
			t.Logf("surge %s: %d answers, all definitive", s.name, s.answers)
		} else {
			t.Logf("surge %s: %d answers, %d not definitive (%v), the last %v after the promotion (%s)",
				s.name, s.answers, s.indefinite, s.codes, last.Round(time.Millisecond), s.lastCode)
		}
		if last > within {
			t.Errorf("surge %s still answered %s %v after the promotion, want definitive answers within %v",
				s.name, s.lastCode, last.Round(time.Millisecond), within)
		}
		s.mu.Unlock()
	}
	for i, s := range servers {
		pushes[i].check(t, s.name, promotedAt, within, w)
	}
	for _, line := range strings.Split(servers[0].proc.log.String(), "\n") {
		if strings.Contains(line, "rebuilt") || strings.Contains(line, "restarted or failed over") {
			t.Logf("surge %s: %s", servers[0].name, line)
		}
	}
	t.Logf("promotion at %s", promotedAt.UTC().Format("15:04:05.000"))
	w.drained(30 * time.Second)
	f2 := w.checkModel(tl)
	t.Logf("admitted %d (%d learnt from ALREADY_PURCHASED); MySQL: %d live orders, %d LOST, %d FAILED, stock %d",
		tl.count(), tl.learnt.Load(), len(f2.orders), len(f2.lost), f2.failed, f2.dbStock)
	w.checkToldStatuses(t, servers, tl, tokens)
}

func join(addrs []string) string {
	var b bytes.Buffer
	for i, a := range addrs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a)
	}
	return b.String()
}

// server is one surge process of the sale and what its grabs were answered.
type server struct {
	name string
	proc *proc

	mu             sync.Mutex
	answers        int
	indefinite     int            // answers not definitive after the fault
	codes          map[string]int // of those, by code
	lastIndefinite time.Time      // when the last of them came
	lastCode       string
	pending        map[int]bool // users (by index) whose last grab here was not definitive
}

// gqlAnswer is what a GraphQL request over HTTP was answered: the data, or the first error's
// code (TRANSPORT when no GraphQL answer came).
type gqlAnswer struct {
	data    map[string]any
	code    string
	orderID string // an error's extensions.orderId (ALREADY_PURCHASED)
	raw     string
}

var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (s *server) do(token, query string, vars map[string]any) gqlAnswer {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, s.proc.base+"query", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return gqlAnswer{code: "TRANSPORT", raw: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Data   map[string]any `json:"data"`
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return gqlAnswer{code: "TRANSPORT", raw: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, raw)}
	}
	a := gqlAnswer{data: r.Data, raw: string(raw)}
	if len(r.Errors) > 0 {
		a.code, _ = r.Errors[0].Extensions["code"].(string)
		if a.code == "" {
			a.code = "NO_CODE"
		}
		a.orderID, _ = r.Errors[0].Extensions["orderId"].(string)
	}
	return a
}

// loginAll logs the world's users in over HTTP (dev mode hands the code back), alternating
// servers, and returns their tokens by user index.
func loginAll(t *testing.T, servers []*server, users int) []string {
	t.Helper()
	tokens := make([]string, users)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < users; i = int(next.Add(1) - 1) {
				s := servers[i%len(servers)]
				phone := fmt.Sprintf("13%09d", i) // newWorld's users
				a := s.do("", `mutation($p: String!) { sendLoginCode(phone: $p) { devCode } }`, map[string]any{"p": phone})
				code, _ := dig(a.data, "sendLoginCode", "devCode").(string)
				if code == "" {
					t.Errorf("sendLoginCode %s: %s", phone, a.raw)
					return
				}
				a = s.do("", `mutation($p: String!, $c: String!) { login(phone: $p, code: $c) { token } }`, map[string]any{"p": phone, "c": code})
				if tokens[i], _ = dig(a.data, "login", "token").(string); tokens[i] == "" {
					t.Errorf("login %s: %s", phone, a.raw)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return tokens
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// grabPause paces each of grabOverHTTP's goroutines: about 250 grabs a second in all, so that
// a sale of 500 units is still on for a couple of seconds after a failover.
const grabPause = 30 * time.Millisecond

// grabOverHTTP has the users grab the world's voucher over HTTP, round-robin over the servers
// and over and over (a user already admitted is answered ALREADY_PURCHASED, one too late
// SOLD_OUT: definitive answers too), from 8 goroutines (grabPause apart) until stop; a user
// whose answer was not definitive grabs again (on the same server) until it is, also after
// stop. It records every answer in the tally (admissions) and in its server.
func (w *world) grabOverHTTP(t *testing.T, tl *tally, servers []*server, tokens []string, stop <-chan struct{}) {
	var next atomic.Int64
	var wg sync.WaitGroup
	vars := map[string]any{"v": strconv.Itoa(w.v)}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int(next.Add(1) - 1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if w.grabOnce(t, tl, servers[n%len(servers)], tokens, n%len(tokens), vars) {
					n = int(next.Add(1) - 1)
				}
				time.Sleep(grabPause)
			}
		}()
	}
	wg.Wait()
	w.finishIndefinite(t, tl, servers, tokens, vars)
}

// grabOnce sends one grab of user i to s and records the answer; true if it was definitive.
func (w *world) grabOnce(t *testing.T, tl *tally, s *server, tokens []string, i int, vars map[string]any) bool {
	a := s.do(tokens[i], `mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId status } }`, vars)
	now := time.Now()
	user := w.users[i]
	switch a.code {
	case "":
		id, _ := strconv.ParseInt(fmt.Sprint(dig(a.data, "seckillVoucher", "orderId")), 10, 64)
		tl.add(t, id, user)
	case "ALREADY_PURCHASED":
		id, _ := strconv.ParseInt(a.orderID, 10, 64)
		tl.add(t, id, user)
	case "SOLD_OUT":
	case "NOT_READY":
		tl.notReady.Add(1)
	default:
		tl.errors.Add(1)
	}
	definite := a.code == "" || a.code == "ALREADY_PURCHASED" || a.code == "SOLD_OUT"
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers++
	if !definite {
		if s.codes == nil {
			s.codes = map[string]int{}
		}
		s.indefinite++
		s.codes[a.code]++
		s.lastIndefinite, s.lastCode = now, a.code
		if s.pending == nil {
			s.pending = map[int]bool{}
		}
		s.pending[i] = true
	} else {
		delete(s.pending, i)
	}
	return definite
}

// finishIndefinite has every user whose last answer was not definitive grab again until it is
// (a grab admitted whose answer was lost is answered ALREADY_PURCHASED with its order then).
func (w *world) finishIndefinite(t *testing.T, tl *tally, servers []*server, tokens []string, vars map[string]any) {
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range servers {
		s.mu.Lock()
		users := make([]int, 0, len(s.pending))
		for i := range s.pending {
			users = append(users, i)
		}
		s.mu.Unlock()
		for _, i := range users {
			for !w.grabOnce(t, tl, s, tokens, i, vars) {
				if time.Now().After(deadline) {
					t.Errorf("user %d: no definitive answer 30 s after the sale", w.users[i])
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// watchSettled polls MySQL from the promotion on and sends how long after it every order told
// before it stood there (any status); closed without a value if that takes 3 × settledWithin.
func (w *world) watchSettled(tl *tally, promotion time.Time) <-chan time.Duration {
	tl.mu.Lock()
	told := make([]int64, 0, len(tl.admitted))
	for id := range tl.admitted {
		told = append(told, id)
	}
	tl.mu.Unlock()
	out := make(chan time.Duration, 1)
	go func() {
		defer close(out)
		for time.Since(promotion) < 3*settledWithin {
			rows, err := w.db.SQL.Query("SELECT id FROM tb_voucher_order WHERE voucher_id = ?", w.v)
			if err == nil {
				in := map[int64]bool{}
				for rows.Next() {
					var id int64
					if rows.Scan(&id) == nil {
						in[id] = true
					}
				}
				rows.Close()
				if !slices.ContainsFunc(told, func(id int64) bool { return !in[id] }) {
					out <- time.Since(promotion)
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return out
}

// checkToldStatuses asks order(id) of every order id told, as its user: CREATED, LOST or FAILED,
// never null.
func (w *world) checkToldStatuses(t *testing.T, servers []*server, tl *tally, tokens []string) {
	t.Helper()
	index := map[int]int{}
	for i, u := range w.users {
		index[u] = i
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	statuses := map[string]int{}
	n := 0
	for id, user := range tl.admitted {
		s := servers[n%len(servers)]
		n++
		a := s.do(tokens[index[user]], `query($id: ID!) { order(id: $id) { status } }`, map[string]any{"id": strconv.FormatInt(id, 10)})
		st, _ := dig(a.data, "order", "status").(string)
		statuses[st]++
		if st != "CREATED" && st != "LOST" && st != "FAILED" {
			t.Errorf("order %d told to user %d: order(id) answered %s", id, user, a.raw)
		}
	}
	t.Logf("order(id) of the %d ids told: %v", len(tl.admitted), statuses)
}

// stockWatch is a voucherStock subscription over a WebSocket (graphql-transport-ws): the live
// pushes of one server.
type stockWatch struct {
	mu     sync.Mutex
	times  []time.Time
	values []int
	err    error // why it ended early
}

func (s *server) watchStock(t *testing.T, voucherID int) *stockWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.proc.base, "http")+"query",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		cancel()
		t.Fatalf("surge %s: WebSocket: %v", s.name, err)
	}
	t.Cleanup(func() { cancel(); _ = ws.CloseNow() })
	send := func(v any) error { b, _ := json.Marshal(v); return ws.Write(ctx, websocket.MessageText, b) }
	if err := send(map[string]any{"type": "connection_init"}); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), "connection_ack") {
		t.Fatalf("surge %s: connection_init answered %s %v", s.name, b, err)
	}
	err = send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query": `subscription($v: ID!) { voucherStock(voucherId: $v) }`, "variables": map[string]any{"v": strconv.Itoa(voucherID)}}})
	if err != nil {
		t.Fatal(err)
	}
	sw := &stockWatch{}
	go func() {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				if ctx.Err() == nil {
					sw.mu.Lock()
					sw.err = err
					sw.mu.Unlock()
				}
				return
			}
			var m struct {
				Type    string `json:"type"`
				Payload struct {
					Data struct {
						VoucherStock *int `json:"voucherStock"`
					} `json:"data"`
				} `json:"payload"`
			}
			_ = json.Unmarshal(b, &m)
			switch {
			case m.Type == "ping":
				_ = send(map[string]any{"type": "pong"})
			case m.Type == "next" && m.Payload.Data.VoucherStock != nil:
				sw.mu.Lock()
				sw.times = append(sw.times, time.Now())
				sw.values = append(sw.values, *m.Payload.Data.VoucherStock)
				sw.mu.Unlock()
			case m.Type == "error" || m.Type == "complete":
				sw.mu.Lock()
				sw.err = fmt.Errorf("the subscription ended: %s", b)
				sw.mu.Unlock()
				return
			}
		}
	}()
	return sw
}

// check asserts that the server pushed a stock change within within of the promotion
// (the grabs go on, so the stock changes), and that its pushes caught up with Redis's stock
// within a second of the sale's end: sooner than the live hub's 5 s sweep, so through its
// pub/sub subscription.
func (sw *stockWatch) check(t *testing.T, name string, promotion time.Time, within time.Duration, w *world) {
	t.Helper()
	var first time.Time
	sw.mu.Lock()
	for _, at := range sw.times {
		if at.After(promotion) {
			first = at
			break
		}
	}
	n, err := len(sw.times), sw.err
	sw.mu.Unlock()
	if err != nil {
		t.Errorf("surge %s: voucherStock subscription: %v", name, err)
		return
	}
	if first.IsZero() || first.Sub(promotion) > within {
		t.Errorf("surge %s: no voucherStock push within %v of the promotion (%d pushes in all)", name, within, n)
	} else {
		t.Logf("surge %s: first voucherStock push %v after the promotion (%d pushes in all)", name, first.Sub(promotion).Round(time.Millisecond), n)
	}
	want, _ := w.rdb.Get(context.Background(), w.keys.Stock).Int()
	var got int
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		sw.mu.Lock()
		if len(sw.values) > 0 {
			got = sw.values[len(sw.values)-1]
		}
		sw.mu.Unlock()
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	if got != want {
		t.Errorf("surge %s: the last voucherStock push says %d, Redis %d, a second after the sale", name, got, want)
	}
}
