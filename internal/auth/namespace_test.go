package auth_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/testenv"
)

func TestKeysUnderNamespace(t *testing.T) { testenv.EachRedis(t, testKeysUnderNamespace) }

// Every key the login flow writes (code, cooldown, streak, wrong tries, send windows, session,
// the user's sessions) starts with "<ns>:"; nothing lands under the layout without a namespace.
func testKeysUnderNamespace(t *testing.T, rdb redis.UniversalClient) {
	addr := "198.51.100." + testenv.Phone()[8:]
	ctx := auth.WithClientAddress(context.Background(), addr)
	ns := "ns" + testenv.Phone()
	svc, sender, db := newService(t, rdb, auth.Options{Namespace: ns,
		SendsPerClient: auth.Rate{Count: 5, Window: time.Minute}, SendsNew: auth.Rate{Count: 1000, Window: time.Minute}})
	plain := auth.New(rdb, db.Ent, auth.Options{})
	phone := testenv.Phone()
	testenv.CleanupKeys(t, rdb, ns+":*")
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Login(ctx, phone, wrongCode(sender.code(phone))); apperr.CodeOf(err) != apperr.BadUserInput {
		t.Fatalf("a wrong code: %v", err)
	}
	// The code, before the login burns it.
	keys := svc.PhoneKeys(phone)
	token, u, err := svc.Login(ctx, phone, sender.code(phone))
	if err != nil {
		t.Fatal(err)
	}
	written := append(keys[1:], svc.SessionKey(token), svc.SessionsKey(u.ID), ns+":login:send:client:{"+addr+"}", ns+":login:send:new")
	if len(written) != 7 {
		t.Fatalf("keys %v: want gap, streak, wrong tries, session, the user's sessions, client and new phones' send windows", written)
	}
	for _, k := range append(written, keys[0]) {
		if !strings.HasPrefix(k, ns+":login:") {
			t.Errorf("key %q is not under %s:login:", k, ns)
		}
	}
	for _, k := range written {
		if rdb.Exists(ctx, k).Val() != 1 {
			t.Errorf("no key %s", k)
		}
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %s has no TTL (%v)", k, ttl)
		}
	}
	for _, k := range append(plain.PhoneKeys(phone), plain.SessionKey(token), plain.SessionsKey(u.ID), "login:send:client:{"+addr+"}") {
		if strings.HasPrefix(k, ns) {
			t.Fatalf("a service without namespace uses key %s", k)
		}
		if rdb.Exists(ctx, k).Val() != 0 {
			t.Errorf("key %s written outside the namespace", k)
		}
	}
	if s, err := plain.Authenticate(ctx, token); s != nil || err != nil {
		t.Errorf("a service of another namespace accepted the session: %+v %v", s, err)
	}
}

func TestSendLimitsPerNamespace(t *testing.T) { testenv.EachRedis(t, testSendLimitsPerNamespace) }

// The server-wide send window is per namespace: one deployment's sends do not use up another's.
func testSendLimitsPerNamespace(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	limit := auth.Options{SendsNew: auth.Rate{Count: 2, Window: time.Minute}} // the phones are new
	a, b := limit, limit
	a.Namespace, b.Namespace = "a"+testenv.Phone(), "b"+testenv.Phone()
	testenv.CleanupKeys(t, rdb, a.Namespace+":*")
	testenv.CleanupKeys(t, rdb, b.Namespace+":*")
	svcA, _, _ := newService(t, rdb, a)
	svcB, _, _ := newService(t, rdb, b)
	for _, svc := range []*auth.Service{svcA, svcA, svcB, svcB} {
		if _, err := svc.SendCode(ctx, testenv.Phone()); err != nil {
			t.Fatalf("send within its own namespace's limit: %v", err)
		}
	}
	if _, err := svcA.SendCode(ctx, testenv.Phone()); apperr.CodeOf(err) != apperr.RateLimited {
		t.Fatalf("third send of a namespace: %v, want RATE_LIMITED", err)
	}
}

func TestForeignDeploymentRefused(t *testing.T) { testenv.EachRedis(t, testForeignDeploymentRefused) }

// Two deployments given the same namespace share the keys, yet a code or a session minted by
// one is refused by the other, logged at WARN and counted; the refused code stays usable (and
// unlocked) where it was sent.
func testForeignDeploymentRefused(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	ns := "same" + testenv.Phone()
	testenv.CleanupKeys(t, rdb, ns+":*")
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	one, sender, _ := newService(t, rdb, auth.Options{Namespace: ns, Deployment: "one"})
	other, _, _ := newService(t, rdb, auth.Options{Namespace: ns, Deployment: "other",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg})
	phone := testenv.Phone()
	if _, err := one.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	code := sender.code(phone)
	for range 6 { // more than the 5 wrong tries that lock a code
		if _, _, err := other.Login(ctx, phone, code); apperr.CodeOf(err) != apperr.BadUserInput {
			t.Fatalf("login with another deployment's code: %v, want BAD_USER_INPUT", err)
		}
	}
	token, _, err := one.Login(ctx, phone, code)
	if err != nil {
		t.Fatalf("the code no longer works where it was sent: %v", err)
	}
	if s, err := other.Authenticate(ctx, token); s != nil || err != nil {
		t.Fatalf("another deployment's session accepted: %+v %v", s, err)
	}
	if s, err := one.Authenticate(ctx, token); s == nil || err != nil {
		t.Fatalf("own session refused: %+v %v", s, err)
	}
	want := `
# HELP surge_auth_foreign_refused_total Login codes and sessions refused because another deployment minted them (two deployments under one namespace).
# TYPE surge_auth_foreign_refused_total counter
surge_auth_foreign_refused_total{kind="code"} 6
surge_auth_foreign_refused_total{kind="session"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "surge_auth_foreign_refused_total"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "another deployment") {
		t.Errorf("no WARN line: %s", logs.String())
	}
	if strings.Contains(logs.String(), code) {
		t.Errorf("the log holds the code: %s", logs.String())
	}
}
