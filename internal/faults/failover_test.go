package faults_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

// Issue 34, items 1, 2 and 5: what the users of a sale see when the master holding its voucher
// dies (kill -9) or is failed over, on a Cluster whose masters have replicas and on a master
// watched by Sentinel.
const (
	// definiteWithin: from the replica's promotion on, grabs on every server are answered
	// definitively (admitted, ALREADY_PURCHASED, SOLD_OUT) again within this.
	definiteWithin = 2 * time.Second
	// settledWithin: every order told before the promotion stands in the database (CREATED,
	// LOST or FAILED) within this of the promotion.
	settledWithin = 5 * time.Second
)

// TestFailoverMidSale: a sale served by two real surge processes, one running the order
// consumer and one not (SURGE_SECKILL_CONSUMER=false), on the Cluster with replicas and on the
// Sentinel setup; when a quarter of the stock is admitted the master holding the voucher is
// killed (kill -9), or, with SECKILL_FAULTS_LONG=1 too, failed over by CLUSTER FAILOVER or
// SENTINEL FAILOVER. Users keep grabbing, over HTTP, through both servers (each answer not
// definitive is retried). Then:
//   - on each server, no answer but a definitive one later than definiteWithin after the
//     replica's promotion (the time it first says role:master);
//   - every order told before the promotion stands in MySQL within settledWithin of it;
//   - the invariants: no oversell, no user with two live orders, no order id told to two users,
//     every told id answered CREATED, LOST or FAILED by order(id), never null.
func TestFailoverMidSale(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(testing.TB) *testenv.Failover
		graceful bool
	}{
		{"cluster/kill -9", testenv.ReplicaCluster, false},
		{"sentinel/kill -9", testenv.Sentinel, false},
	}
	if long() {
		cases = append(cases,
			struct {
				name     string
				setup    func(testing.TB) *testenv.Failover
				graceful bool
			}{"cluster/CLUSTER FAILOVER", testenv.ReplicaCluster, true},
			struct {
				name     string
				setup    func(testing.TB) *testenv.Failover
				graceful bool
			}{"sentinel/SENTINEL FAILOVER", testenv.Sentinel, true})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { failoverMidSale(t, c.setup(t), c.graceful) })
	}
}

func failoverMidSale(t *testing.T, f *testenv.Failover, graceful bool) {
	stock := pick(500, 2000)
	users := stock * 2
	rdb := f.Client(t)
	env := []string{"SURGE_REDIS_ADDRS=" + join(f.Addrs)}
	if f.Sentinel() {
		env = []string{"SURGE_REDIS_SENTINELS=" + join(f.Addrs), "SURGE_REDIS_MASTER=" + f.MasterName}
	}
	w := newWorldOn(t, testenv.MySQL(t), rdb, env, stock, users)
	// Dev mode answers login codes (the users log in over HTTP); no demo data.
	dev := []string{"SURGE_MODE=dev", "SURGE_SEED=false"}
	servers := []*server{
		{name: "with consumer", proc: startSurge(t, append(w.env(true, defaultClaimIdle), dev...)...)},
		{name: "without consumer", proc: startSurge(t, append(w.env(false, defaultClaimIdle), dev...)...)},
	}
	start := time.Now()
	tokens := loginAll(t, servers, users)
	t.Logf("%d users logged in over HTTP in %v", users, time.Since(start).Round(time.Millisecond))

	master, replica := f.MasterOf(w.keys.Stock)
	tl := newTally()
	var killedAt, promotedAt time.Time
	stop := make(chan struct{})
	faulted := make(chan struct{})
	go func() {
		defer close(faulted)
		begin := time.Now()
		for tl.count() < stock/4 || time.Since(begin) < time.Second {
			time.Sleep(time.Millisecond)
		}
		promoted := f.Promotion(replica, 30*time.Second)
		killedAt = time.Now()
		if graceful {
			f.Failover(replica)
		} else {
			f.Kill(master)
		}
		at, ok := <-promoted
		if !ok {
			t.Errorf("%s was not promoted within 30 s of the fault on %s", replica, master)
			close(stop)
			return
		}
		promotedAt = at
		settled := w.watchSettled(tl, at)
		time.Sleep(definiteWithin + 2*time.Second) // grabs go on, measured
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
	fault := "killed"
	if graceful {
		fault = "failed over"
	}
	t.Logf("%s: master %s of the voucher %s with %d admitted; replica %s promoted %v later",
		f, master, fault, tl.count(), replica, promotedAt.Sub(killedAt).Round(time.Millisecond))
	for _, s := range servers {
		if !s.proc.alive() {
			t.Fatalf("surge %s exited: %v", s.name, s.proc.waitErr)
		}
		s.mu.Lock()
		last := s.lastIndefinite.Sub(promotedAt)
		t.Logf("surge %s: %d answers, %d not definitive (%v), the last %v after the promotion (%s)",
			s.name, s.answers, s.indefinite, s.codes, last.Round(time.Millisecond), s.lastCode)
		if last > definiteWithin {
			t.Errorf("surge %s still answered %s %v after the promotion, want definitive answers within %v",
				s.name, s.lastCode, last.Round(time.Millisecond), definiteWithin)
		}
		s.mu.Unlock()
	}
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

// grabOverHTTP has the users grab the world's voucher over HTTP, round-robin over the servers
// and over and over (a user already admitted is answered ALREADY_PURCHASED, one too late
// SOLD_OUT: definitive answers too), from 8 goroutines until stop. It records every answer in
// the tally (admissions) and in its server (the answers not definitive after the fault).
func (w *world) grabOverHTTP(t *testing.T, tl *tally, servers []*server, tokens []string, stop <-chan struct{}) {
	var next atomic.Int64
	var wg sync.WaitGroup
	vars := map[string]any{"v": strconv.Itoa(w.v)}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := int(next.Add(1) - 1)
				i := n % len(tokens)
				s := servers[n%len(servers)]
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
				default:
					if a.code == "NOT_READY" {
						tl.notReady.Add(1)
					} else {
						tl.errors.Add(1)
					}
				}
				s.mu.Lock()
				s.answers++
				if a.code != "" && a.code != "ALREADY_PURCHASED" && a.code != "SOLD_OUT" {
					if s.codes == nil {
						s.codes = map[string]int{}
					}
					s.indefinite++
					s.codes[a.code]++
					s.lastIndefinite, s.lastCode = now, a.code
				}
				s.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
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
