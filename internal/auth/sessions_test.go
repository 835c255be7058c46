package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/user"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/testenv"
)

// loginAs logs phone in on svc once more (its send cooldown skipped) and returns the token.
func loginAs(t *testing.T, rdb redis.UniversalClient, svc *auth.Service, sender *captureSender, phone string) string {
	t.Helper()
	ctx := context.Background()
	rdb.Del(ctx, svc.PhoneKeys(phone)[1]) // the cooldown marker
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	token, _, err := svc.Login(ctx, phone, sender.code(phone))
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestRoleFollowsAdminPhonesOnNextRequest(t *testing.T) {
	testenv.EachRedis(t, testRoleFollowsAdminPhones)
}

// The role is the phone's in the configuration of the server answering, not the one it had
// at login: a server restarted without the phone in AdminPhones (a new Service on the same
// Redis and database) answers the old token as a USER at its first request, and one with a
// phone added answers it as an ADMIN. SyncRoles brings the users table along.
func testRoleFollowsAdminPhones(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	admin, other := testenv.Phone(), testenv.Phone()
	before, sender, db := newService(t, rdb, auth.Options{AdminPhones: []string{admin}})
	adminToken := loginAs(t, rdb, before, sender, admin)
	otherToken := loginAs(t, rdb, before, sender, other)
	if s, err := before.Authenticate(ctx, adminToken); err != nil || s == nil || !s.IsAdmin() {
		t.Fatalf("the admin's session before the restart: %+v %v", s, err)
	}

	after := sibling(rdb, before, db, auth.Options{AdminPhones: []string{other}})
	if s, err := after.Authenticate(ctx, adminToken); err != nil || s == nil || s.IsAdmin() || s.Role != user.RoleUSER {
		t.Fatalf("the removed admin's old token after the restart: %+v %v, want a USER session", s, err)
	}
	if s, err := after.Authenticate(ctx, otherToken); err != nil || s == nil || !s.IsAdmin() {
		t.Fatalf("the added admin's old token after the restart: %+v %v, want an ADMIN session", s, err)
	}

	if n, err := after.SyncRoles(ctx); err != nil || n != 2 {
		t.Fatalf("SyncRoles: %d users changed, %v; want 2", n, err)
	}
	for phone, want := range map[string]user.Role{admin: user.RoleUSER, other: user.RoleADMIN} {
		if u := db.Ent.User.Query().Where(user.Phone(phone)).OnlyX(ctx); u.Role != want {
			t.Errorf("users table: %s is %s, want %s", phone, u.Role, want)
		}
	}
	if n, err := after.SyncRoles(ctx); err != nil || n != 0 {
		t.Fatalf("SyncRoles again: %d users changed, %v; want 0", n, err)
	}
	none := sibling(rdb, before, db, auth.Options{})
	if n, err := none.SyncRoles(ctx); err != nil || n != 1 {
		t.Fatalf("SyncRoles with no admin phones: %d users changed, %v; want 1", n, err)
	}
}

func TestRevokeSessionsEndsEveryLoginOfTheUser(t *testing.T) {
	testenv.EachRedis(t, testRevokeSessions)
}

// A user's sessions (three logins) are listed, and revoked together: at once on the server
// that revoked them, within SessionCache on another; another user's session stays. A logout
// takes its session off the list.
func testRevokeSessions(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	const bound = 300 * time.Millisecond
	a, sender, db := newService(t, rdb, auth.Options{SessionCache: bound})
	b := sibling(rdb, a, db, auth.Options{SessionCache: bound})
	phone, bystander := testenv.Phone(), testenv.Phone()
	start := time.Now()
	tokens := []string{loginAs(t, rdb, a, sender, phone), loginAs(t, rdb, a, sender, phone), loginAs(t, rdb, a, sender, phone),
		loginAs(t, rdb, a, sender, phone)}
	kept := loginAs(t, rdb, a, sender, bystander)
	uid := db.Ent.User.Query().Where(user.Phone(phone)).OnlyIDX(ctx)
	for _, svc := range []*auth.Service{a, b} {
		for _, tok := range append(tokens, kept) {
			if s, err := svc.Authenticate(ctx, tok); s == nil || err != nil {
				t.Fatalf("before the revocation: %v, %v", s, err)
			}
		}
	}

	if ok, err := a.Logout(ctx, tokens[3]); !ok || err != nil {
		t.Fatalf("logout: %v %v", ok, err)
	}
	tokens = tokens[:3]
	listed, err := b.Sessions(ctx, uid)
	if err != nil || len(listed) != 3 {
		t.Fatalf("sessions of the user after 4 logins and a logout: %+v %v, want 3", listed, err)
	}
	for _, s := range listed {
		if len(s.ID) != 16 || s.CreatedAt.Before(start.Truncate(time.Millisecond)) || s.CreatedAt.After(time.Now()) ||
			s.ExpiresAt.Before(time.Now().Add(29*time.Minute)) || s.ExpiresAt.After(time.Now().Add(30*time.Minute)) {
			t.Errorf("session %+v: want a 16-digit id, created during the test, ending in about 30 min", s)
		}
	}
	if n := rdb.ZCard(ctx, a.SessionsKey(uid)).Val(); n != 3 {
		t.Errorf("the user's index holds %d sessions after a logout, want 3", n)
	}

	n, err := a.RevokeSessions(ctx, uid)
	if err != nil || n != 3 {
		t.Fatalf("revoke: %d, %v; want 3 sessions ended", n, err)
	}
	revoked := time.Now()
	for _, tok := range tokens {
		if s, err := a.Authenticate(ctx, tok); s != nil || err != nil {
			t.Fatalf("the revoking server still answers a revoked session: %+v %v", s, err)
		}
	}
	for _, tok := range tokens {
		for {
			s, err := b.Authenticate(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				break
			}
			if time.Since(revoked) > bound {
				t.Fatalf("another server still answers a revoked session %v after the revocation (bound %v)", time.Since(revoked), bound)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if s, err := a.Authenticate(ctx, kept); s == nil || err != nil {
		t.Fatalf("another user's session was revoked too: %v %v", s, err)
	}
	if listed, err := a.Sessions(ctx, uid); err != nil || len(listed) != 0 {
		t.Fatalf("sessions after the revocation: %+v %v", listed, err)
	}
	if n, err := a.RevokeSessions(ctx, uid); err != nil || n != 0 {
		t.Fatalf("revoking again: %d %v", n, err)
	}
	if _, err := a.RevokeSessions(ctx, 1<<40); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("revoking the sessions of no user: %v, want NOT_FOUND", err)
	}
	if _, err := a.Sessions(ctx, 1<<40); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("listing the sessions of no user: %v, want NOT_FOUND", err)
	}
	// The user logs in again: a new session, listed.
	if s, err := a.Authenticate(ctx, loginAs(t, rdb, a, sender, phone)); s == nil || err != nil {
		t.Fatalf("a login after the revocation: %v %v", s, err)
	}
}

func TestSessionEndsAfterMaxAgeHoweverBusy(t *testing.T) {
	testenv.EachRedis(t, testSessionMaxAge)
}

// A session used without pause (every request slides it) still ends SessionMaxAge after its
// login, from memory as well as from Redis, and its key goes.
func testSessionMaxAge(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	const maxAge = 1500 * time.Millisecond
	svc, sender, db := newService(t, rdb, auth.Options{SessionMaxAge: maxAge, SessionCache: 300 * time.Millisecond, SlideEvery: -1})
	phone := testenv.Phone()
	loginStarted := time.Now()
	token := loginAs(t, rdb, svc, sender, phone)
	loggedIn := time.Now()
	uid := db.Ent.User.Query().Where(user.Phone(phone)).OnlyIDX(ctx)
	for {
		s, err := svc.Authenticate(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if s == nil {
			if now.Before(loginStarted.Add(maxAge)) {
				t.Fatalf("the session ended %v after the login, before its lifetime of %v", now.Sub(loginStarted), maxAge)
			}
			break
		}
		if now.After(loggedIn.Add(maxAge + 20*time.Millisecond)) {
			t.Fatalf("the session still answers %v after the login (lifetime %v)", now.Sub(loggedIn), maxAge)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := rdb.Exists(ctx, svc.SessionKey(token)).Val(); n != 0 {
		t.Error("the ended session's key is still there")
	}
	if listed, err := svc.Sessions(ctx, uid); err != nil || len(listed) != 0 {
		t.Errorf("sessions listed after the end: %+v %v", listed, err)
	}
}

func TestSessionsPerUserAreCapped(t *testing.T) { testenv.EachRedis(t, testSessionsCapped) }

// A user holds at most MaxSessionsPerUser sessions: a login past it ends the oldest. The index
// is bounded and has a TTL.
func testSessionsCapped(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	svc, sender, db := newService(t, rdb, auth.Options{MaxSessionsPerUser: 3, SessionCache: -1})
	phone := testenv.Phone()
	var tokens []string
	for range 5 {
		tokens = append(tokens, loginAs(t, rdb, svc, sender, phone))
		time.Sleep(2 * time.Millisecond) // distinct login times: "oldest" is well defined
	}
	for i, tok := range tokens {
		s, err := svc.Authenticate(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if live := s != nil; live != (i >= 2) {
			t.Errorf("login %d of 5 with at most 3 sessions: live %v", i+1, live)
		}
	}
	uid := db.Ent.User.Query().Where(user.Phone(phone)).OnlyIDX(ctx)
	key := svc.SessionsKey(uid)
	if n := rdb.ZCard(ctx, key).Val(); n != 3 {
		t.Errorf("the user's index holds %d sessions, want 3", n)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Errorf("the user's index has TTL %v, want the session lifetime (24 h)", ttl)
	}
	if rdb.Exists(ctx, svc.SessionKey(tokens[0])).Val() != 0 {
		t.Error("an evicted session's key is still there")
	}
}
