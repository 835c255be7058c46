package redisfailover_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
	"github.com/surgekit/surge/redisfailover"
)

// recoveryBound is how long after a replica's promotion every call through a client of
// NewClient must succeed again (issue 34: grabs definitive again within 2 s of the promotion).
const recoveryBound = 2 * time.Second

// probe calls fn again and again until stopped and keeps what it needs to tell when calls
// stopped failing.
type probe struct {
	name string
	fn   func(ctx context.Context) error

	mu        sync.Mutex
	lastFail  time.Time // end of the last failed call
	lastErr   error
	okAfter   int // successful calls that started after the promotion
	promotion time.Time
}

func (p *probe) run(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		default:
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := p.fn(ctx)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.lastFail, p.lastErr = time.Now(), err
		} else if !p.promotion.IsZero() && start.After(p.promotion) {
			p.okAfter++
		}
		p.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// onMaster returns the first of name(0), name(1), … whose key keyOf(name) lives on master: the
// test puts every library's keys (and pub/sub channel) on the master it kills.
func onMaster(t *testing.T, f *testenv.Failover, master string, keyOf func(string) string) string {
	t.Helper()
	for i := range 1000 {
		s := "f" + strconv.Itoa(i)
		if m, _ := f.MasterOf(keyOf(s)); m == master {
			return s
		}
	}
	t.Fatalf("no name of 1000 puts its key on %s", master)
	return ""
}

// TestLibrariesFollowAFailover: the master holding the keys of an idgen generator, a cache (its
// values and its event channel) and a lock is killed (kill -9), on the Cluster with replicas and
// on the Sentinel setup, while two clients of NewClient (two processes) use them. Within 2 s of
// the replica's promotion every call succeeds again: Next, a write read back through the other
// process's L1 (which only the pub/sub invalidation event can refresh), a lock released by one
// process and obtained by the other within 500 ms (woken by the release message, not its
// lease), and a SET/GET.
//
// Also under SENTINEL FAILOVER, where the old master stays up (a master still, until Sentinel
// demotes it about 10 s later): the pub/sub connections must leave it for the new master,
// where the events are published.
func TestLibrariesFollowAFailover(t *testing.T) {
	for _, c := range []struct {
		name     string
		setup    func(testing.TB) *testenv.Failover
		graceful bool
	}{
		{"cluster/kill -9", testenv.ReplicaCluster, false},
		{"sentinel/kill -9", testenv.Sentinel, false},
		{"sentinel/SENTINEL FAILOVER", testenv.Sentinel, true},
	} {
		t.Run(c.name, func(t *testing.T) { followAFailover(t, c.setup(t), c.graceful) })
	}
}

func followAFailover(t *testing.T, f *testenv.Failover, graceful bool) {
	ctx := context.Background()
	ns := "rf" + testenv.Phone()
	a, b := f.Client(t), f.Client(t)
	testenv.CleanupKeys(t, a, ns+":*")

	gen, err := idgen.New(a, "order", idgen.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	if _, err := gen.Next(ctx); err != nil {
		t.Fatal(err)
	}
	idKey := ns + ":id:order:" + time.Now().UTC().Format("20060102")
	master, replica := f.MasterOf(idKey)
	cacheName := onMaster(t, f, master, func(s string) string { return ns + ":cache:" + s + ":events" })
	cacheID := onMaster(t, f, master, func(s string) string { return "{" + s + "}" })
	lockName := onMaster(t, f, master, func(s string) string { return "{" + s + "}" })
	plainKey := onMaster(t, f, master, func(s string) string { return ns + ":" + s })
	plainKey = ns + ":" + plainKey

	open := func(rdb redis.UniversalClient) *cache.Cache[int] {
		c, err := cache.New[int](ctx, rdb, cache.Options{Name: cacheName, Prefix: ns + ":cache",
			Local: &cache.LocalOptions{Size: 10, TTL: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ca, cb := open(a), open(b)
	la, lb := lock.New(a, lock.Options{Prefix: ns + ":lock"}), lock.New(b, lock.Options{Prefix: ns + ":lock"})
	defer la.Close()
	defer lb.Close()

	var seq int
	probes := []*probe{
		{name: "idgen Next", fn: func(ctx context.Context) error { _, err := gen.Next(ctx); return err }},
		{name: "SET and GET", fn: func(ctx context.Context) error {
			if err := a.Set(ctx, plainKey, "v", time.Minute).Err(); err != nil {
				return err
			}
			return b.Get(ctx, plainKey).Err()
		}},
		{name: "cache Set, seen through the other process's L1", fn: func(ctx context.Context) error {
			seq++
			if err := ca.Set(ctx, cacheID, seq); err != nil {
				return err
			}
			for deadline := time.Now().Add(500 * time.Millisecond); ; time.Sleep(10 * time.Millisecond) {
				v, err := cb.Get(ctx, cacheID)
				if err == nil && v == seq {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the other process still reads %d (%v), not %d", v, err, seq)
				}
			}
		}},
		{name: "lock released by one process, obtained by the other within 500 ms", fn: func(ctx context.Context) error {
			l, err := la.Obtain(ctx, lockName, lock.LockOptions{Wait: 300 * time.Millisecond, Lease: time.Second})
			if err != nil {
				return err
			}
			got := make(chan error, 1)
			go func() {
				l2, err := lb.Obtain(ctx, lockName, lock.LockOptions{Wait: 800 * time.Millisecond, Lease: time.Second})
				if err == nil {
					err = l2.Release(ctx)
				}
				got <- err
			}()
			time.Sleep(100 * time.Millisecond)
			released := time.Now()
			if err := l.Release(ctx); err != nil {
				<-got
				return err
			}
			if err := <-got; err != nil {
				return err
			}
			if d := time.Since(released); d > 500*time.Millisecond {
				return fmt.Errorf("the waiter obtained the lock %v after its release", d)
			}
			return nil
		}},
	}
	if err := ca.Set(ctx, cacheID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Get(ctx, cacheID); err != nil { // now in its L1
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go p.run(stop, &wg)
	}
	time.Sleep(300 * time.Millisecond)
	promoted := f.Promotion(replica, 30*time.Second)
	killed := time.Now()
	if graceful {
		f.Failover(replica)
	} else {
		f.Kill(master)
	}
	at, ok := <-promoted
	if !ok {
		close(stop)
		wg.Wait()
		t.Fatalf("%s was not promoted within 30 s of the kill of %s", replica, master)
	}
	for _, p := range probes {
		p.mu.Lock()
		p.promotion = at
		p.mu.Unlock()
	}
	time.Sleep(recoveryBound + 2*time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%s: master %s killed or failed over, replica %s promoted %v later", f, master, replica, at.Sub(killed).Round(time.Millisecond))
	for _, p := range probes {
		rec := p.lastFail.Sub(at)
		if p.lastFail.IsZero() {
			t.Logf("%s: no call failed, %d succeeded after the promotion", p.name, p.okAfter)
			continue
		}
		t.Logf("%s: last failure %v after the promotion (%v), %d calls succeeded after it", p.name, rec.Round(time.Millisecond), p.lastErr, p.okAfter)
		if rec > recoveryBound {
			t.Errorf("%s: still failing %v after the promotion (bound %v): %v", p.name, rec.Round(time.Millisecond), recoveryBound, p.lastErr)
		}
		if p.okAfter == 0 {
			t.Errorf("%s: no call succeeded after the promotion", p.name)
		}
	}
}

// A client of redisfailover.NewClient on a Cluster follows a failover by itself; the options
// are those of redis.NewUniversalClient.
func ExampleNewClient_cluster() {
	rdb := redisfailover.NewClient(&redis.UniversalOptions{
		Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, // seeds; replicas too
		// Calls end at their context's deadline, also while a node hangs.
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
}

// With Sentinel: the master's name and the Sentinels' addresses.
func ExampleNewClient_sentinel() {
	rdb := redisfailover.NewClient(&redis.UniversalOptions{
		MasterName:            "mymaster",
		Addrs:                 []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"},
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
}
