package e2e_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/testenv"
)

const createShopType = `mutation($in: CreateShopTypeInput!) { createShopType(input: $in) { id name } }`

// TestRemovedAdminIsRevokedAtRestart: the steps. An admin logs in; the phone leaves
// SURGE_ADMIN_PHONES and the server restarts (a server of the same deployment with that
// configuration); the old token is a USER's at the first request: me.role says so, and
// createShopType is FORBIDDEN.
func TestRemovedAdminIsRevokedAtRestart(t *testing.T) {
	e := start(t)
	token := e.login(e.admin)
	if str(e.ok(token, me, nil), "me", "role") != "ADMIN" {
		t.Fatal("the configured admin is not an ADMIN")
	}
	e.ok(token, createShopType, map[string]any{"in": map[string]any{"name": "Before"}})

	restarted := e.another(func(c *app.Config) { c.AdminPhones = nil })
	if role := str(restarted.ok(token, me, nil), "me", "role"); role != "USER" {
		t.Fatalf("me.role with the old token after the restart: %s, want USER", role)
	}
	restarted.wantCode("FORBIDDEN", token, createShopType, map[string]any{"in": map[string]any{"name": "After"}})
}

const (
	userSessions       = `query($u: ID!) { userSessions(userId: $u) { id createdAt expiresAt } }`
	revokeUserSessions = `mutation($u: ID!) { revokeUserSessions(userId: $u) }`
)

// TestAdminRevokesAUsersSessions: an admin lists a user's sessions (two logins) and ends them
// all in one mutation; the user's tokens are anonymous at once, another user's token stays.
// Only an admin may do either; bad ids are coded errors.
func TestAdminRevokesAUsersSessions(t *testing.T) {
	e := start(t)
	admin := e.login(e.admin)
	phone := testenv.Phone()
	first := e.login(phone)
	e.app.Redis.Del(context.Background(), e.app.Auth.PhoneKeys(phone)[1]) // the send cooldown has passed
	second := e.login(phone)
	bystander := e.login(testenv.Phone())
	uid := str(e.ok(first, me, nil), "me", "id")
	vars := map[string]any{"u": uid}

	e.wantCode("UNAUTHENTICATED", "", userSessions, vars)
	e.wantCode("FORBIDDEN", first, userSessions, vars)
	e.wantCode("FORBIDDEN", first, revokeUserSessions, vars)

	listed := list(e.ok(admin, userSessions, vars), "userSessions")
	if len(listed) != 2 {
		t.Fatalf("userSessions after two logins: %v", listed)
	}
	for _, s := range listed {
		created, err1 := time.Parse(time.RFC3339, str(s, "createdAt"))
		expires, err2 := time.Parse(time.RFC3339, str(s, "expiresAt"))
		if len(str(s, "id")) != 16 || err1 != nil || err2 != nil || !expires.After(created.Add(29*time.Minute)) {
			t.Errorf("session %v: want a 16-digit id and an expiry about 30 min after its login", s)
		}
	}
	if n := get(e.ok(admin, revokeUserSessions, vars), "revokeUserSessions"); n != 2.0 {
		t.Fatalf("revokeUserSessions: %v, want 2", n)
	}
	for _, tok := range []string{first, second} {
		if get(e.ok(tok, me, nil), "me") != nil {
			t.Fatal("a revoked token still answers me")
		}
		e.wantCode("UNAUTHENTICATED", tok, `{ myOrders { totalCount } }`, nil)
	}
	if str(e.ok(bystander, me, nil), "me", "id") == "" {
		t.Fatal("another user's token was revoked too")
	}
	if listed := list(e.ok(admin, userSessions, vars), "userSessions"); len(listed) != 0 {
		t.Fatalf("userSessions after the revocation: %v", listed)
	}

	// A shop's id is no user's; a malformed id is bad input.
	_, shopID := firstTypeAndShop(e)
	e.wantCode("NOT_FOUND", admin, revokeUserSessions, map[string]any{"u": shopID})
	e.wantCode("NOT_FOUND", admin, userSessions, map[string]any{"u": shopID})
	e.wantCode("BAD_USER_INPUT", admin, revokeUserSessions, map[string]any{"u": "x"})
}

// Issue 33, item 2: after a logout, an orderStatus subscription on the token still delivered
// CREATED seconds later, and would have run as long as its socket stayed open. Revocation
// reaches open subscriptions on every server of the deployment: after logout or
// revokeUserSessions, through either server, each subscription that runs on one of the
// user's tokens ends with an "error" of code UNAUTHENTICATED within SessionCache + 1 s, in
// both protocols; another user's subscriptions run on, and the sockets stay open
// (anonymous).
func TestRevocationEndsOpenSubscriptions(t *testing.T) {
	e := start(t, func(c *app.Config) { c.SeckillConsumer = false })
	b := e.another()
	bound := e.app.Config.SessionCache + time.Second
	v := e.warmVoucher(10)
	vars := func(order int64) (stock, status map[string]any) {
		return map[string]any{"v": itoa(v)}, map[string]any{"o": strconv.FormatInt(order, 10)}
	}
	subscribe := func(srv *env, token string, order int64) *wsClient {
		t.Helper()
		c := srv.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
		stock, status := vars(order)
		c.subscribe("s", stockSub, stock)
		c.nextData("s", "voucherStock")
		c.subscribe("o", orderSub, status)
		for {
			m := c.next("")
			if m.ID == "s" && m.Type == "next" {
				continue // a grab's stock change
			}
			if m.ID != "o" || m.Type != "next" || !strings.Contains(string(m.Payload), `"orderStatus":"QUEUED"`) {
				t.Fatalf("got %s %s %s, want orderStatus QUEUED", m.ID, m.Type, m.Payload)
			}
			return c
		}
	}
	// ended expects both subscriptions of c to end with UNAUTHENTICATED within bound of since.
	ended := func(what string, c *wsClient, since time.Time) {
		t.Helper()
		left := map[string]bool{"s": true, "o": true}
		for len(left) > 0 {
			m := c.next("")
			if m.ID == "s" && m.Type == "next" {
				continue // a grab's stock change, sent before the end
			}
			var errs []gqlError
			if m.Type != "error" || !left[m.ID] || json.Unmarshal(m.Payload, &errs) != nil || len(errs) == 0 || code(errs[0]) != "UNAUTHENTICATED" {
				t.Fatalf("%s: got %s %s %s, want an error UNAUTHENTICATED for each subscription", what, m.ID, m.Type, m.Payload)
			}
			delete(left, m.ID)
			if took := m.at.Sub(since); took > bound {
				t.Errorf("%s: subscription %s ended %v after the revocation, want within %v", what, m.ID, took.Round(time.Millisecond), bound)
			} else {
				t.Logf("%s: subscription %s ended %v after the revocation", what, m.ID, took.Round(time.Millisecond))
			}
		}
	}

	// A bystander's subscriptions on both servers run on throughout.
	bystander, bystanderID := e.user()
	bystanderOrder := e.grab(bystanderID, v)
	onA, onB := subscribe(e, bystander, bystanderOrder), subscribe(b, bystander, bystanderOrder)

	// Logout through server A ends the token's subscriptions on A and on B; a connection in
	// the legacy protocol too.
	token, userID := e.user()
	order := e.grab(userID, v)
	a1, b1 := subscribe(e, token, order), subscribe(b, token, order)
	legacy := dialRawWS(t, b.url+"/query", "graphql-ws")
	legacy.send(`{"type":"connection_init","payload":{"Authorization":"Bearer ` + token + `"}}`)
	legacy.expect(`{"type":"connection_ack"}`)
	legacy.expect(`{"type":"ka"}`)
	legacy.send(`{"id":"o","type":"start","payload":{"query":"subscription($o: ID!) { orderStatus(orderId: $o) }","variables":{"o":"` + strconv.FormatInt(order, 10) + `"}}}`)
	if got := legacy.read(); !strings.Contains(got, `"type":"data"`) || !strings.Contains(got, "QUEUED") {
		t.Fatalf("legacy orderStatus: %s", got)
	}
	since := time.Now()
	e.ok(token, `mutation { logout }`, nil)
	ended("logout on A, subscriptions on A", a1, since)
	ended("logout on A, subscriptions on B", b1, since)
	for {
		got := legacy.read()
		if got == `{"type":"ka"}` {
			continue
		}
		if !strings.Contains(got, `"id":"o"`) || !strings.Contains(got, `"type":"error"`) || !strings.Contains(got, "UNAUTHENTICATED") {
			t.Fatalf("legacy protocol after the logout: %s, want an error UNAUTHENTICATED", got)
		}
		break
	}
	// The sockets stay open, anonymous: a new subscription that needs a login is refused.
	_, status := vars(order)
	b1.subscribe("again", orderSub, status)
	if err := b1.nextError("again"); code(err) != "UNAUTHENTICATED" {
		t.Fatalf("a new subscription after the logout: %+v, want UNAUTHENTICATED", err)
	}

	// revokeUserSessions through server B ends the subscriptions of each of the user's
	// tokens, on A and on B.
	phone := testenv.Phone()
	first := e.login(phone)
	e.app.Redis.Del(context.Background(), e.app.Auth.PhoneKeys(phone)[1]) // the send cooldown has passed
	second := e.login(phone)
	uid, _ := strconv.Atoi(str(e.ok(first, me, nil), "me", "id"))
	order = e.grab(uid, v)
	a2, b2 := subscribe(e, first, order), subscribe(b, second, order)
	admin := b.login(e.admin)
	since = time.Now()
	if n := get(b.ok(admin, revokeUserSessions, map[string]any{"u": strconv.Itoa(uid)}), "revokeUserSessions"); n != 2.0 {
		t.Fatalf("revokeUserSessions: %v, want 2", n)
	}
	ended("revocation on B, subscriptions on A", a2, since)
	ended("revocation on B, subscriptions on B", b2, since)

	// The bystander's subscriptions were left alone: a grab moves the stock they watch (10
	// units, 4 grabs), and they see it.
	_, other := e.user()
	e.grab(other, v)
	for _, c := range []*wsClient{onA, onB} {
		for {
			m := c.next("")
			if m.ID != "s" || m.Type != "next" {
				t.Fatalf("the bystander got %s %s %s, want the stock", m.ID, m.Type, m.Payload)
			}
			if strings.Contains(string(m.Payload), `"voucherStock":6`) {
				break
			}
		}
	}
}
