package e2e_test

import (
	"context"
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
