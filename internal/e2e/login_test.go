package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/testenv"
)

const (
	sendCode = `mutation($p: String!) { sendLoginCode(phone: $p) { phone expiresIn retryAfter devCode } }`
	login    = `mutation($p: String!, $c: String!) { login(phone: $p, code: $c) { token expiresIn user { id phone role } } }`
	me       = `{ me { id phone role } }`
)

func TestLoginFlow(t *testing.T) {
	// Every request reads its session from Redis and slides it (by default a server answers a
	// session from memory for 1 s and slides it once a minute: internal/auth's tests).
	e := start(t, func(c *app.Config) { c.SessionCache, c.SessionSlide = 0, 0 })
	ctx := context.Background()
	rdb := e.app.Redis
	phone := testenv.Phone()
	users := func() int { return e.app.DB.Ent.User.Query().CountX(ctx) }

	// Bad phones are refused before anything is stored or sent.
	for _, bad := range []string{"123", "23800000000", "1380000000x", ""} {
		e.wantCode("BAD_USER_INPUT", "", sendCode, map[string]any{"p": bad})
	}

	d := e.ok("", sendCode, map[string]any{"p": phone})
	if get(d, "sendLoginCode", "devCode") != nil {
		t.Fatalf("production mode leaked devCode: %v", d)
	}
	if get(d, "sendLoginCode", "expiresIn").(float64) != 120 || get(d, "sendLoginCode", "retryAfter").(float64) != 60 {
		t.Fatalf("payload = %v", d)
	}
	e.wantCode("RATE_LIMITED", "", sendCode, map[string]any{"p": phone})

	// Five wrong codes lock the code: the right one is refused afterwards.
	right := e.codes.get(phone)
	wrong := "000000"
	if right == wrong {
		wrong = "111111"
	}
	for i := 0; i < 5; i++ {
		e.wantCode("BAD_USER_INPUT", "", login, map[string]any{"p": phone, "c": wrong})
	}
	r := e.wantCode("BAD_USER_INPUT", "", login, map[string]any{"p": phone, "c": right})
	mustContain(t, r.Errors[0].Message, "too many wrong tries")
	e.wantCode("BAD_USER_INPUT", "", login, map[string]any{"p": phone, "c": "12ab56"})
	if users() != 0 {
		t.Fatal("a refused login created a user")
	}

	// After the cooldown (skipped here by deleting its key) a new code works.
	rdb.Del(ctx, e.app.Auth.PhoneKeys(phone)[1]) // the cooldown marker
	e.ok("", sendCode, map[string]any{"p": phone})
	d = e.ok("", login, map[string]any{"p": phone, "c": e.codes.get(phone)})
	token := str(d, "login", "token")
	if len(token) < 22 || str(d, "login", "user", "phone") != phone || str(d, "login", "user", "role") != "USER" {
		t.Fatalf("login payload = %v", d)
	}
	if get(d, "login", "expiresIn").(float64) != 1800 {
		t.Fatalf("expiresIn = %v", get(d, "login", "expiresIn"))
	}

	// The token works, and every request slides the session back to 30 minutes.
	if str(e.ok(token, me, nil), "me", "phone") != phone {
		t.Fatal("me does not answer the logged-in user")
	}
	rdb.PExpire(ctx, e.app.Auth.SessionKey(token), 10*time.Second)
	e.ok(token, `{ shopTypes { id } }`, nil)
	if ttl := rdb.PTTL(ctx, e.app.Auth.SessionKey(token)).Val(); ttl < 29*time.Minute {
		t.Fatalf("session TTL after a request = %v, want slid to ~30m", ttl)
	}

	// An unknown token is anonymous; protected fields say UNAUTHENTICATED.
	if get(e.ok("not-a-token", me, nil), "me") != nil {
		t.Fatal("unknown token resolved to a user")
	}
	e.wantCode("UNAUTHENTICATED", "", `{ myOrders { totalCount } }`, nil)

	// Logout kills the token.
	if get(e.ok(token, `mutation { logout }`, nil), "logout") != true {
		t.Fatal("logout did not report a session")
	}
	if get(e.ok(token, me, nil), "me") != nil {
		t.Fatal("token still works after logout")
	}
	e.wantCode("UNAUTHENTICATED", token, `{ myOrders { totalCount } }`, nil)
	if users() != 1 {
		t.Fatalf("%d users, want 1", users())
	}
}

func TestDevModeReturnsCode(t *testing.T) {
	e := start(t, func(c *app.Config) { c.Mode = "dev" })
	phone := testenv.Phone()
	d := e.ok("", sendCode, map[string]any{"p": phone})
	code := str(d, "sendLoginCode", "devCode")
	if code == "" || code != e.codes.get(phone) {
		t.Fatalf("devCode = %q, sent %q", code, e.codes.get(phone))
	}
	if str(e.ok("", login, map[string]any{"p": phone, "c": code}), "login", "user", "phone") != phone {
		t.Fatal("dev code did not log in")
	}
}
