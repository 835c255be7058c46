package seckill_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// Replica-acknowledged admission (Options.ReplicaAcks) on real replication: private
// redis-servers as a master and its replica, a lagging replica promoted after the master
// died, and a Cluster of two masters with a replica each.

// ackTimeout bounds the tests' waits for a replica that will not answer, and gives one that
// follows time to, on a busy machine (at 200 ms, a replica starved of CPU missed it once).
const ackTimeout = time.Second

// TestReplicaAcksLaggingReplicaPromoted: users are admitted while the replica follows, then
// the replica lags (frozen, its link cut), more users grab on the master, the master dies and
// the replica is promoted with what it had; the service's client follows it (as a Sentinel
// client does) and its consumer persists. Without the option the orders told meanwhile are
// lost with the master (recorded LOST: the hazard); with it none is told before a replica has
// it: those grabs are answered ErrReplicationTimeout, and every order told is CREATED.
func TestReplicaAcksLaggingReplicaPromoted(t *testing.T) {
	for _, c := range []struct {
		name string
		acks int
	}{{"off", 0}, {"on", 1}} {
		t.Run(c.name, func(t *testing.T) { testLaggingReplicaPromoted(t, c.acks) })
	}
}

func testLaggingReplicaPromoted(t *testing.T, acks int) {
	ctx := context.Background()
	master := testenv.StartRedis(t)
	replica := replicaOf(t, master)
	rdb, moveTo := movableClient(t, master.Addr)
	e := newEnv(t, rdb)
	s := e.serviceOn(rdb, seckill.Options{ReplicaAcks: acks, ReplicaAckTimeout: ackTimeout})
	const stock, before, during = 100, 20, 40
	users := e.users(before + during)
	v := e.onSale(s, stock)
	l := &ledger{}

	grabAll(t, s, v, users[:before], l)
	caughtUp(t, master.Addr) // without the option too: these orders are on the replica

	// The replica lags: frozen, and its link cut, so that what the master writes meanwhile
	// never reaches it (frozen alone, it would apply it from its socket on waking).
	replica.Freeze()
	do(t, master.Addr, "client", "kill", "type", "replica")
	refused := grabConcurrently(t, s, v, users[before:], l)
	if acks == 0 && (len(refused) != 0 || len(l.told) != before+during) {
		t.Fatalf("without acknowledgements: %d told, %d refused; want every grab told", len(l.told), len(refused))
	}
	if acks > 0 {
		if len(refused) != during || len(l.told) != before {
			t.Fatalf("with a lagging replica: %d of %d grabs refused, %d told in all; want every grab refused, %d told", len(refused), during, len(l.told), before)
		}
		// A retry finds the user a buyer, but is not told the order while no replica has it.
		for _, u := range refused[:2] {
			if a, err := s.Grab(ctx, u, v); !errors.Is(err, seckill.ErrReplicationTimeout) {
				t.Fatalf("user %d retries while the replica lags: %+v %v, want ErrReplicationTimeout", u, a, err)
			}
		}
	}

	// The master dies; the replica wakes and is promoted with what it had; clients follow.
	master.Kill()
	replica.Thaw()
	do(t, replica.Addr, "replicaof", "no", "one")
	moveTo(replica.Addr)
	e.consume(s)

	created, lost := settleTold(t, s, v, l)
	t.Logf("acks %d: %d told (%d refused): %d CREATED, %d LOST", acks, len(l.told), len(refused), created, lost)
	if acks == 0 {
		if lost != during || created != before {
			t.Fatalf("without acknowledgements: %d CREATED, %d LOST; want %d and %d (the orders told while the replica lagged are lost)", created, lost, before, during)
		}
	} else {
		if lost != 0 || created != before {
			t.Fatalf("with acknowledgements: %d CREATED, %d LOST; want %d and none lost", created, lost, before)
		}
		// A replica joins the new master; the users refused grab again: their orders went with
		// the old master, untold, so they are admitted afresh.
		replicaOf(t, replica)
		grabAll(t, s, v, refused, l)
		e.drained(v, 20*time.Second)
		checkTold(t, e, s, v, stock, l)
	}
	st := e.state(v)
	if st.dbStock+st.orders != stock || st.dupUsers != 0 {
		t.Fatalf("database: %+v; want stock + live orders = %d, no user twice", st, stock)
	}
	seen := map[int64]bool{}
	for _, x := range l.told {
		if seen[x.order] {
			t.Fatalf("order id %d told twice", x.order)
		}
		seen[x.order] = true
	}
}

// TestReplicaAcksAdmitAsUsual: with a replica that follows, the option admits every grab,
// batched (fewer WAITs than grabs, as many as the service sent), and every order persists;
// the same with one call per grab.
func TestReplicaAcksAdmitAsUsual(t *testing.T) {
	for _, c := range []struct {
		name      string
		pipelines int
	}{{"batched", 0}, {"one-call-per-grab", -1}} {
		t.Run(c.name, func(t *testing.T) {
			master := testenv.StartRedis(t)
			replicaOf(t, master)
			e, _ := newEnvOn(t, master.Addr)
			s := e.service(seckill.Options{ReplicaAcks: 1, ReplicaAckTimeout: 2 * time.Second, Pipelines: c.pipelines})
			e.consume(s)
			const n = 150
			v := e.onSale(s, n)
			l := &ledger{}
			waits := waitCalls(t, master.Addr)
			if refused := grabConcurrently(t, s, v, e.users(n), l); len(refused) != 0 || len(l.told) != n {
				t.Fatalf("%d admitted, %d refused; want all %d admitted", len(l.told), len(refused), n)
			}
			served := waitCalls(t, master.Addr) - waits
			if sent := seckill.ReplicaAckWaits(s); served != sent || sent == 0 {
				t.Fatalf("the master served %d WAITs, the service sent %d", served, sent)
			}
			if c.pipelines == 0 && served >= n {
				t.Errorf("%d WAITs for %d concurrent grabs: not batched", served, n)
			}
			t.Logf("%d grabs, %d WAITs", n, served)
			e.drained(v, 20*time.Second)
			checkTold(t, e, s, v, n, l)
		})
	}
}

// TestReplicaAcksPerMasterOnCluster: on a Cluster of two masters whose replica of the first
// lags, concurrent grabs of a voucher on each master go out in shared batches; each pipeline
// must wait for its own master's replicas: every grab of the first voucher is refused, every
// grab of the second admitted. A WAIT sent to the wrong master would admit the first or
// refuse the second.
func TestReplicaAcksPerMasterOnCluster(t *testing.T) {
	c := privateCluster(t, 2)
	e := newEnv(t, c.rdb)
	s := e.service(seckill.Options{ReplicaAcks: 1, ReplicaAckTimeout: ackTimeout})
	vs := make([]int, 2) // a voucher on each master
	for found := 0; found < 2; {
		v := e.onSale(s, 1000)
		node, err := c.rdb.MasterForKey(context.Background(), seckill.KeysOf(e.prefix, v).Stock)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range c.masters {
			if node.Options().Addr == m.Addr && vs[i] == 0 {
				vs[i] = v
				found++
			}
		}
	}
	c.replicas[0].Freeze()
	do(t, c.masters[0].Addr, "client", "kill", "type", "replica")
	waits := []int64{waitCalls(t, c.masters[0].Addr), waitCalls(t, c.masters[1].Addr)}

	const each = 60
	users := e.users(2 * each)
	var admitted, refused [2]atomic.Int64
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			_, err := s.Grab(context.Background(), u, vs[i%2])
			switch {
			case err == nil:
				admitted[i%2].Add(1)
			case errors.Is(err, seckill.ErrReplicationTimeout):
				if refused[i%2].Add(1) == 1 {
					t.Logf("voucher %d: %v", i%2, err)
				}
			default:
				t.Errorf("user %d, voucher %d: %v", u, vs[i%2], err)
			}
		})
	}
	wg.Wait()
	if admitted[0].Load() != 0 || refused[0].Load() != each || admitted[1].Load() != each || refused[1].Load() != 0 {
		t.Fatalf("lagging master: %d admitted, %d refused; following master: %d admitted, %d refused; want 0/%d and %d/0",
			admitted[0].Load(), refused[0].Load(), admitted[1].Load(), refused[1].Load(), each, each)
	}
	for i, m := range c.masters {
		if n := waitCalls(t, m.Addr) - waits[i]; n == 0 {
			t.Errorf("master %d served no WAIT", i)
		}
	}

	// The second master's replica takes over (CLUSTER FAILOVER). The client's slot map still
	// names the old master, which now answers MOVED: the grabs follow it to the new master,
	// whose replica (the old master) acknowledges them.
	do(t, c.replicas[1].Addr, "cluster", "failover")
	waitCluster(t, "the failover done and the old master following", func() bool {
		return strings.Contains(info(t, c.replicas[1].Addr, "replication"), "state=online")
	})
	if refused := grabConcurrently(t, s, vs[1], e.users(20), &ledger{}); len(refused) != 0 {
		t.Fatalf("after the failover: %d grabs refused", len(refused))
	}
}

// info is a section of the Redis at addr's INFO.
func info(t *testing.T, addr, section string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReplicaAcksOptions: bad values are refused by New with a clear error.
func TestReplicaAcksOptions(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	for _, c := range []struct {
		o    seckill.Options
		want string
	}{
		{seckill.Options{ReplicaAcks: -1}, "negative"},
		{seckill.Options{ReplicaAcks: 1, Strategy: seckill.StrategySync}, "StrategyLua"},
		{seckill.Options{ReplicaAcks: 1, ReplicaAckTimeout: 3 * time.Second}, "ReadTimeout"}, // go-redis's default: 5 s
	} {
		s, err := seckill.New(e.db.Ent, e.rdb, e.options(c.o))
		if err == nil {
			_ = s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.o, err, c.want)
		}
	}
}

// serviceOn is service on a given client (not another of the same kind).
func (e *env) serviceOn(rdb redis.UniversalClient, o seckill.Options) *seckill.Service {
	e.t.Helper()
	s, err := seckill.New(e.db.Ent, rdb, e.options(o))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

// newEnvOn is an env on the Redis at addr.
func newEnvOn(t testing.TB, addr string) (*env, *redis.Client) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return newEnv(t, rdb), rdb
}

// movableClient is a client of the Redis at addr whose new connections go wherever moveTo
// last pointed: what a Sentinel client does once told that the master moved.
func movableClient(t *testing.T, addr string) (rdb *redis.Client, moveTo func(addr string)) {
	var to atomic.Value
	to.Store(addr)
	rdb = redis.NewClient(&redis.Options{Addr: addr, Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, to.Load().(string))
	}})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, func(addr string) { to.Store(addr) }
}

// grabConcurrently grabs once for each user, all at once, records the admissions and returns
// the users refused with ErrReplicationTimeout; any other answer fails the test.
func grabConcurrently(t *testing.T, s *seckill.Service, v int, users []int, l *ledger) (refused []int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			a, err := s.Grab(context.Background(), u, v)
			switch {
			case err == nil:
				l.add(u, a.OrderID)
			case errors.Is(err, seckill.ErrReplicationTimeout):
				mu.Lock()
				refused = append(refused, u)
				mu.Unlock()
			default:
				t.Errorf("grab by user %d: %v", u, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return refused
}

// settleTold waits until every order told is CREATED or lost (a LOST row, or ErrOrderLost),
// and counts them.
func settleTold(t *testing.T, s *seckill.Service, v int, l *ledger) (created, lost int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, x := range l.told {
		for {
			o, err := s.Order(context.Background(), x.user, x.order)
			switch {
			case errors.Is(err, seckill.ErrOrderLost) && time.Now().After(deadline):
				lost++ // inferred: no process recorded it
			case err == nil && o != nil && o.Status == seckillorder.StatusLOST:
				lost++
			case err == nil && o != nil && o.Status == seckillorder.StatusCREATED && o.UserID == x.user && o.VoucherID == v:
				created++
			case time.Now().Before(deadline):
				time.Sleep(50 * time.Millisecond) // queued, or the loss not recorded yet
				continue
			default:
				t.Fatalf("user %d was told order %d: order(%d) = %+v, %v", x.user, x.order, x.order, o, err)
			}
			break
		}
	}
	return created, lost
}

// replicaOf starts a private redis-server replicating master and waits until it is in sync.
func replicaOf(t testing.TB, master *testenv.RedisServer) *testenv.RedisServer {
	t.Helper()
	host, port, _ := net.SplitHostPort(master.Addr)
	r := testenv.StartRedis(t, "--replicaof", host, port)
	caughtUp(t, master.Addr)
	return r
}

// caughtUp waits until a replica of the (single node) master at addr holds everything it
// has written.
func caughtUp(t testing.TB, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pipe := c.Pipeline()
		pipe.Set(ctx, "replica-test:barrier", 1, time.Minute) // WAIT covers this connection's writes
		wait := pipe.Do(ctx, "wait", 1, 200)
		_, _ = pipe.Exec(ctx)
		if n, err := wait.Int(); err == nil && n >= 1 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("no replica of %s caught up within 30 s (WAIT: %d, %v)", addr, n, err)
		}
	}
}

// do runs one command on the Redis at addr.
func do(t *testing.T, addr string, args ...any) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%v on %s: %v", args, addr, err)
	}
}

// waitCalls is how many WAITs the Redis at addr has served.
func waitCalls(t *testing.T, addr string) int64 {
	t.Helper()
	_, rest, ok := strings.Cut(info(t, addr, "commandstats"), "cmdstat_wait:calls=")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testCluster is a private Redis Cluster: masters[i]'s replica is replicas[i].
type testCluster struct {
	masters, replicas []*testenv.RedisServer
	rdb               *redis.ClusterClient
}

// privateCluster starts a Cluster of n masters with a replica each, the slots split evenly.
func privateCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	ctx := context.Background()
	c := &testCluster{}
	var all []*testenv.RedisServer
	bus := map[*testenv.RedisServer]string{}
	for range 2 * n {
		port := strconv.Itoa(testenv.FreePort(t))
		srv := testenv.StartRedis(t, "--cluster-enabled", "yes", "--cluster-port", port, "--cluster-node-timeout", "5000")
		bus[srv] = port
		all = append(all, srv)
	}
	c.masters, c.replicas = all[:n], all[n:]
	clients := map[*testenv.RedisServer]*redis.Client{}
	for _, srv := range all {
		clients[srv] = redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer clients[srv].Close()
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range c.masters {
		first, last := i*16384/n, (i+1)*16384/n-1
		must(clients[m].Do(ctx, "cluster", "addslotsrange", first, last).Err())
	}
	host, port, _ := net.SplitHostPort(all[0].Addr)
	for _, srv := range all[1:] {
		must(clients[srv].Do(ctx, "cluster", "meet", host, port, bus[all[0]]).Err())
	}
	waitCluster(t, "every node to know every other", func() bool {
		for _, srv := range all {
			nodes, err := clients[srv].ClusterNodes(ctx).Result()
			if err != nil || strings.Count(strings.TrimSpace(nodes), "\n")+1 != len(all) || strings.Contains(nodes, "handshake") {
				return false
			}
		}
		return true
	})
	for i, r := range c.replicas {
		id, err := clients[c.masters[i]].Do(ctx, "cluster", "myid").Text()
		must(err)
		must(clients[r].Do(ctx, "cluster", "replicate", id).Err())
	}
	waitCluster(t, "cluster_state:ok and every replica online", func() bool {
		for _, srv := range all {
			info, err := clients[srv].ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		for _, m := range c.masters {
			info, err := clients[m].Info(ctx, "replication").Result()
			if err != nil || !strings.Contains(info, "state=online") {
				return false
			}
		}
		return true
	})
	addrs := make([]string, n)
	for i, m := range c.masters {
		addrs[i] = m.Addr
	}
	c.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.rdb.Close() })
	return c
}

func waitCluster(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("private cluster: no %s within 30 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
