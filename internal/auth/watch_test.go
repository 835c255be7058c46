package auth_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/testenv"
)

// ends records how a watched subscription ended.
type ends struct {
	mu   sync.Mutex
	errs map[string]error
	at   map[string]time.Time
}

// watch registers a subscription named name on svc for token, as the WebSocket transport
// does; admin marks it admin-only.
func (e *ends) watch(t *testing.T, svc *auth.Service, name, token string, admin bool) {
	t.Helper()
	ctx, err := svc.WithToken(context.Background(), token)
	if err != nil || auth.FromContext(ctx) == nil {
		t.Fatalf("%s: no session (%v)", name, err)
	}
	ctx, stop := svc.Watch(ctx, func(err error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.errs == nil {
			e.errs, e.at = map[string]error{}, map[string]time.Time{}
		}
		if _, twice := e.errs[name]; twice {
			t.Errorf("%s ended twice", name)
		}
		e.errs[name], e.at[name] = err, time.Now()
	})
	t.Cleanup(stop)
	if admin {
		auth.WatchRole(ctx)
	}
}

func (e *ends) get(name string) (error, time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	err, ok := e.errs[name]
	return err, e.at[name], ok
}

// wait waits up to within for name to end, with want.
func (e *ends) wait(t *testing.T, name string, want error, since time.Time, within time.Duration) {
	t.Helper()
	for {
		if err, at, ok := e.get(name); ok {
			if err != want {
				t.Fatalf("%s ended with %v, want %v", name, err, want)
			}
			if at.Sub(since) > within {
				t.Fatalf("%s ended %v after, want within %v", name, at.Sub(since), within)
			}
			return
		}
		if time.Since(since) > within+time.Second {
			t.Fatalf("%s did not end within %v", name, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *ends) none(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if err, _, ok := e.get(n); ok {
			t.Errorf("%s ended (%v), want it running", n, err)
		}
	}
}

// A logout or a revocation ends the subscriptions on the session's tokens: at once on the
// server that ran it, within SessionCache and a round trip on another server of the
// deployment. Other sessions' subscriptions run on, and the reads slide the sessions in use.
func TestWatchEndsSubscriptionsOnEveryServer(t *testing.T) {
	testenv.EachRedis(t, testWatchEndsSubscriptions)
}

func testWatchEndsSubscriptions(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	const cache = 300 * time.Millisecond
	opts := auth.Options{SessionCache: cache, SlideEvery: 400 * time.Millisecond}
	a, sender, db := newService(t, rdb, opts)
	b := sibling(rdb, a, db, opts)
	bound := cache + 200*time.Millisecond // a round trip, with room for a loaded machine

	var e ends
	loggedOut, bystander := loginFor(t, a, sender), loginFor(t, a, sender)
	revoked := loginAs(t, rdb, a, sender, testenv.Phone())
	me, err := a.Authenticate(ctx, revoked)
	if err != nil || me == nil {
		t.Fatal(me, err)
	}
	for _, svc := range []struct {
		name string
		s    *auth.Service
	}{{"a", a}, {"b", b}} {
		e.watch(t, svc.s, "logout "+svc.name, loggedOut, false)
		e.watch(t, svc.s, "logout 2 "+svc.name, loggedOut, false)
		e.watch(t, svc.s, "revoked "+svc.name, revoked, false)
		e.watch(t, svc.s, "bystander "+svc.name, bystander, false)
	}

	since := time.Now()
	if ok, err := a.Logout(ctx, loggedOut); !ok || err != nil {
		t.Fatalf("logout: %v %v", ok, err)
	}
	for _, n := range []string{"logout a", "logout 2 a"} {
		if _, _, ok := e.get(n); !ok {
			t.Fatalf("%s: the server that logged out did not end it at once", n)
		}
	}
	e.wait(t, "logout b", auth.ErrSessionEnded, since, bound)
	e.wait(t, "logout 2 b", auth.ErrSessionEnded, since, bound)

	since = time.Now()
	if n, err := b.RevokeSessions(ctx, me.UserID); n != 1 || err != nil {
		t.Fatalf("revoke: %d %v", n, err)
	}
	if _, _, ok := e.get("revoked b"); !ok {
		t.Fatal("the server that revoked did not end its subscription at once")
	}
	e.wait(t, "revoked a", auth.ErrSessionEnded, since, bound)
	e.none(t, "bystander a", "bystander b")

	// The watched session is in use: its TTL slides (the reads send PEXPIRE at most once per
	// SlideEvery).
	key := a.SessionKey(bystander)
	rdb.PExpire(ctx, key, 10*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for rdb.PTTL(ctx, key).Val() < 29*time.Minute {
		if time.Now().After(deadline) {
			t.Fatalf("the TTL of a watched session is %v: not slid", rdb.PTTL(ctx, key).Val())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.none(t, "bystander a", "bystander b")
}

// An admin-only subscription ends when its session no longer has the ADMIN role (here: on a
// server of the deployment whose SURGE_ADMIN_PHONES no longer lists the phone); the same
// session's other subscriptions run on.
func TestWatchRoleEndsAdminOnlySubscriptions(t *testing.T) {
	rdb := testenv.Redis(t)
	phone := testenv.Phone()
	opts := auth.Options{SessionCache: 100 * time.Millisecond, AdminPhones: []string{phone}}
	adm, sender, db := newService(t, rdb, opts)
	opts.AdminPhones = nil
	demoted := sibling(rdb, adm, db, opts)
	token := loginAs(t, rdb, adm, sender, phone)
	var e ends
	e.watch(t, adm, "admin-only, still admin", token, true)
	e.watch(t, demoted, "admin-only", token, true)
	e.watch(t, demoted, "any user", token, false)
	e.wait(t, "admin-only", auth.ErrAdminRevoked, time.Now(), time.Second)
	time.Sleep(300 * time.Millisecond) // a round more
	e.none(t, "admin-only, still admin", "any user")
}

// The sessions of all open subscriptions are read in one pipelined round trip per round, one
// read per session however many subscriptions share it: never one command per subscription.
func TestWatchReadsAllSessionsInOnePipeline(t *testing.T) {
	testenv.EachRedis(t, testWatchReadsInOnePipeline)
}

// countingHook counts, once on, the single commands and the pipelines sent, and the HGETALLs
// in each pipeline.
type countingHook struct {
	on        atomic.Bool
	singles   atomic.Int64
	mu        sync.Mutex
	pipelines []int // HGETALLs per pipeline
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			h.singles.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			n := 0
			for _, c := range cmds {
				if strings.EqualFold(c.Name(), "hgetall") {
					n++
				}
			}
			h.mu.Lock()
			h.pipelines = append(h.pipelines, n)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func testWatchReadsInOnePipeline(t *testing.T, rdb redis.UniversalClient) {
	const sessions = 60
	hook := &countingHook{}
	rdb.AddHook(hook)
	svc, sender, _ := newService(t, rdb, auth.Options{SessionCache: 250 * time.Millisecond})
	tokens := make([]string, sessions)
	for i := range tokens {
		tokens[i] = loginFor(t, svc, sender)
	}
	var e ends
	for i, tok := range tokens {
		e.watch(t, svc, "s"+tok, tok, false) // its start reads the session (Authenticate)
		if i%2 == 0 {
			e.watch(t, svc, "t"+tok, tok, false) // a second subscription on the session
		}
	}
	hook.on.Store(true)
	time.Sleep(900 * time.Millisecond) // three rounds
	hook.on.Store(false)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	full := 0
	for _, n := range hook.pipelines {
		if n == sessions {
			full++
		} else if n != 0 {
			t.Errorf("a pipeline read %d sessions, want all %d at once", n, sessions)
		}
	}
	if full < 2 || hook.singles.Load() != 0 {
		t.Fatalf("%d rounds read all %d sessions in one pipeline, %d single commands; want at least 2 and none", full, sessions, hook.singles.Load())
	}
	t.Logf("%d subscriptions on %d sessions: %d rounds of one pipeline each", sessions+sessions/2, sessions, full)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) != 0 {
		t.Fatalf("live sessions' subscriptions ended: %v", e.errs)
	}
}

// With Redis frozen (SIGSTOP), a round that cannot read the sessions ends nothing (a store
// failure is no logout), is counted, and does not hang: once Redis answers again, a session
// ended meanwhile ends its subscriptions.
func TestWatchWithFrozenRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	reg := prometheus.NewRegistry()
	svc, sender, db := newService(t, rdb, auth.Options{SessionCache: 250 * time.Millisecond, Registerer: reg})
	other := sibling(rdb, svc, db, auth.Options{SessionCache: 250 * time.Millisecond})
	token := loginFor(t, svc, sender)
	var e ends
	e.watch(t, svc, "sub", token, false)

	srv.Freeze()
	time.Sleep(2500 * time.Millisecond) // a round waits out its 2 s timeout
	srv.Thaw()
	e.none(t, "sub")
	if n := counter(t, reg, "surge_auth_subscription_rechecks_total", "failed"); n < 1 {
		t.Fatalf("failed rounds counted: %v, want at least 1", n)
	}
	since := time.Now()
	if ok, err := other.Logout(context.Background(), token); !ok || err != nil {
		t.Fatalf("logout: %v %v", ok, err)
	}
	e.wait(t, "sub", auth.ErrSessionEnded, since, 3*time.Second) // a round may still be waiting
	if n := counter(t, reg, "surge_auth_subscriptions_ended_total", "session_ended"); n != 1 {
		t.Fatalf("subscriptions ended counted: %v, want 1", n)
	}
}

// counter reads the value of a counter with one label from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s}", name, label)
	return 0
}
