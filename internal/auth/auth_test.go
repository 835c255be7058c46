package auth_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/user"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
)

// captureSender records codes instead of sending them.
type captureSender struct {
	mu    sync.Mutex
	codes map[string]string
	fail  error
}

func (c *captureSender) Send(_ context.Context, phone, code string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	if c.codes == nil {
		c.codes = map[string]string{}
	}
	c.codes[phone] = code
	return nil
}

func (c *captureSender) code(phone string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.codes[phone]
}

// newService builds the service on rdb (a single node or a Cluster client) and a fresh database,
// under a namespace of its own unless opts names one: its users' ids start where every fresh
// database's do, and their session indexes must not meet another test's.
func newService(t *testing.T, rdb redis.UniversalClient, opts auth.Options) (*auth.Service, *captureSender, *store.DB) {
	t.Helper()
	if opts.Namespace == "" {
		opts.Namespace = "auth" + testenv.Phone()
		testenv.CleanupKeys(t, rdb, opts.Namespace+":*")
	}
	db, err := store.OpenMySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &captureSender{}
	if opts.Sender == nil {
		opts.Sender = s
	}
	return auth.New(rdb, db.Ent, opts), s, db
}

// sibling is another server of svc's deployment (its namespace, deployment id and database),
// with opts otherwise.
func sibling(rdb redis.UniversalClient, svc *auth.Service, db *store.DB, opts auth.Options) *auth.Service {
	opts.Namespace, opts.Deployment = svc.Options().Namespace, svc.Options().Deployment
	return auth.New(rdb, db.Ent, opts)
}

func wrongCode(right string) string {
	if right == "000000" {
		return "111111"
	}
	return "000000"
}

// Every test that reaches Redis runs twice through testenv.EachRedis: as subtest "single" on one
// Redis node and as "cluster" on the 3-master Redis Cluster, where a script or multi-key command
// whose keys span hash slots fails with CROSSSLOT.

func TestSendCodeStoresCodeWithTTLAndRateLimits(t *testing.T) {
	testenv.EachRedis(t, testSendCodeStoresCodeWithTTLAndRateLimits)
}

func testSendCodeStoresCodeWithTTLAndRateLimits(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	svc, sender, _ := newService(t, rdb, auth.Options{})
	phone := testenv.Phone()

	sent, err := svc.SendCode(ctx, phone)
	if err != nil {
		t.Fatal(err)
	}
	if sent.DevCode != "" {
		t.Fatalf("devCode leaked outside dev mode: %q", sent.DevCode)
	}
	if len(sender.code(phone)) != 6 {
		t.Fatalf("sender got code %q, want 6 digits", sender.code(phone))
	}
	ttl := rdb.PTTL(ctx, svc.PhoneKeys(phone)[0]).Val()
	if ttl <= 110*time.Second || ttl > 2*time.Minute {
		t.Fatalf("code TTL = %v, want about 2m", ttl)
	}
	_, err = svc.SendCode(ctx, phone)
	if apperr.CodeOf(err) != apperr.RateLimited {
		t.Fatalf("second send within 60 s: got %v, want RATE_LIMITED", err)
	}
}

func TestSendCooldownEscalates(t *testing.T) { testenv.EachRedis(t, testSendCooldownEscalates) }

// The cooldown after a send is the base for the first FreeSends sends of a streak, then doubles
// up to its cap; there is no quota, so an attacker's sends cannot lock the owner out longer
// than the cap.
func testSendCooldownEscalates(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	base := 40 * time.Millisecond
	svc, _, _ := newService(t, rdb, auth.Options{SendInterval: base, FreeSends: 2, MaxSendInterval: 4 * base})
	phone := testenv.Phone()
	t.Cleanup(func() { rdb.Del(context.Background(), svc.PhoneKeys(phone)...) })
	for i, want := range []time.Duration{base, base, 2 * base, 4 * base, 4 * base, 4 * base} {
		sent, err := svc.SendCode(ctx, phone)
		if err != nil {
			t.Fatalf("send %d after its cooldown: %v", i+1, err)
		}
		if sent.RetryAfter != want {
			t.Fatalf("send %d: next send after %v, want %v", i+1, sent.RetryAfter, want)
		}
		if _, err := svc.SendCode(ctx, phone); apperr.CodeOf(err) != apperr.RateLimited {
			t.Fatalf("send %d: a send within the cooldown: %v, want RATE_LIMITED", i+1, err)
		}
		time.Sleep(want + 5*time.Millisecond)
	}
}

func TestSendRatePerClient(t *testing.T) { testenv.EachRedis(t, testSendRatePerClient) }

// Sends from one client address are limited in a fixed window; other addresses go on.
func testSendRatePerClient(t *testing.T, rdb redis.UniversalClient) {
	svc, sender, _ := newService(t, rdb, auth.Options{SendsPerClient: auth.Rate{Count: 2, Window: time.Minute}})
	addr := "198.51.100." + testenv.Phone()[8:] // unique per run: the window outlives the test
	ctx := auth.WithClientAddress(context.Background(), addr)
	for i := range 2 {
		if _, err := svc.SendCode(ctx, testenv.Phone()); err != nil {
			t.Fatalf("send %d from one address: %v", i+1, err)
		}
	}
	phone := testenv.Phone()
	_, err := svc.SendCode(ctx, phone)
	if apperr.CodeOf(err) != apperr.RateLimited || sender.code(phone) != "" {
		t.Fatalf("third send from one address within the window: %v (sent %q), want RATE_LIMITED", err, sender.code(phone))
	}
	other := auth.WithClientAddress(context.Background(), addr+"1")
	if _, err := svc.SendCode(other, testenv.Phone()); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// Without an address (no HTTP request behind it) the per-client limit does not apply.
	if _, err := svc.SendCode(context.Background(), testenv.Phone()); err != nil {
		t.Fatalf("no address: %v", err)
	}
}

// The server-wide window is one key for the whole deployment: tested on a private Redis, where
// no other test sends. (The phones are new: SendsNew's window; TestNewPhonesHaveAWindowOfTheirOwn
// tests SendsGlobal's.)
func TestSendRateGlobal(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr})
	t.Cleanup(func() { rdb.Close() })
	svc, _, _ := newService(t, rdb, auth.Options{SendsNew: auth.Rate{Count: 3, Window: 300 * time.Millisecond}})
	ctx := context.Background()
	for i := range 3 {
		if _, err := svc.SendCode(ctx, testenv.Phone()); err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
	}
	if _, err := svc.SendCode(ctx, testenv.Phone()); apperr.CodeOf(err) != apperr.RateLimited {
		t.Fatalf("fourth send in the window: %v, want RATE_LIMITED", err)
	}
	time.Sleep(350 * time.Millisecond)
	if _, err := svc.SendCode(ctx, testenv.Phone()); err != nil {
		t.Fatalf("send in the next window: %v", err)
	}
}

// Production's default sender logs that a code was made, never the code.
func TestLogSenderRevealsCodesOnlyInDevMode(t *testing.T) {
	for _, reveal := range []bool{false, true} {
		var buf bytes.Buffer
		s := auth.LogSender{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Reveal: reveal}
		if err := s.Send(context.Background(), "13812345678", "493817"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "493817"); got != reveal || strings.Contains(buf.String(), "13812345678") {
			t.Fatalf("Reveal=%v: the log %q (code shown: %v)", reveal, buf.String(), got)
		}
	}
}

// Bad phones are refused before any Redis call, so one Redis kind is enough here.
func TestSendCodeRejectsBadPhone(t *testing.T) {
	svc, sender, _ := newService(t, testenv.Redis(t), auth.Options{})
	for _, p := range []string{"", "12345678901", "1380000000", "138000000001", "23800000000", "1380000000a", "+8613800000000"} {
		_, err := svc.SendCode(context.Background(), p)
		if apperr.CodeOf(err) != apperr.BadUserInput {
			t.Errorf("phone %q: got %v, want BAD_USER_INPUT", p, err)
		}
		if sender.code(p) != "" {
			t.Errorf("phone %q: a code was sent", p)
		}
	}
}

func TestSendFailureReleasesCooldown(t *testing.T) {
	testenv.EachRedis(t, testSendFailureReleasesCooldown)
}

func testSendFailureReleasesCooldown(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	sender := &captureSender{fail: errors.New("sms gateway down")}
	svc, _, _ := newService(t, rdb, auth.Options{Sender: sender})
	phone := testenv.Phone()
	if _, err := svc.SendCode(ctx, phone); err == nil {
		t.Fatal("send with a failing gateway succeeded")
	}
	sender.mu.Lock()
	sender.fail = nil
	sender.mu.Unlock()
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatalf("retry after a failed send was refused: %v", err)
	}
}

func TestLoginWrongCodeLocksAfterFiveTries(t *testing.T) {
	testenv.EachRedis(t, testLoginWrongCodeLocksAfterFiveTries)
}

func testLoginWrongCodeLocksAfterFiveTries(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	svc, sender, _ := newService(t, rdb, auth.Options{})
	phone := testenv.Phone()
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	right := sender.code(phone)
	for i := 1; i <= 5; i++ {
		_, _, err := svc.Login(ctx, phone, wrongCode(right))
		if apperr.CodeOf(err) != apperr.BadUserInput {
			t.Fatalf("wrong try %d: got %v, want BAD_USER_INPUT", i, err)
		}
	}
	if _, _, err := svc.Login(ctx, phone, right); apperr.CodeOf(err) != apperr.BadUserInput {
		t.Fatalf("right code after 5 wrong tries: got %v, want refused", err)
	}
}

func TestLoginParallelGuessesCannotExceedLimit(t *testing.T) {
	testenv.EachRedis(t, testLoginParallelGuessesCannotExceedLimit)
}

func testLoginParallelGuessesCannotExceedLimit(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	svc, sender, _ := newService(t, rdb, auth.Options{})
	phone := testenv.Phone()
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	right := sender.code(phone)
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := svc.Login(ctx, phone, wrongCode(right)); err != nil && err.Error() == "wrong code" {
				wrong.Add(1)
			}
		}()
	}
	wg.Wait()
	// Tries 1–4 answer "wrong code"; the 5th and everything after answer "locked".
	if n := wrong.Load(); n != 4 {
		t.Fatalf("%d parallel guesses were judged as plain wrong tries, want exactly 4", n)
	}
	if _, _, err := svc.Login(ctx, phone, right); err == nil {
		t.Fatal("right code accepted after the try limit was spent in parallel")
	}
}

func TestLoginSessionLifecycle(t *testing.T) { testenv.EachRedis(t, testLoginSessionLifecycle) }

func testLoginSessionLifecycle(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	// Every request reads Redis and slides (the defaults remember and throttle: see
	// TestSessionSlidesAtMostOncePerSlideEvery).
	svc, sender, db := newService(t, rdb, auth.Options{SessionTTL: 30 * time.Minute, SessionCache: -1, SlideEvery: -1})
	phone := testenv.Phone()
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	code := sender.code(phone)
	token, u, err := svc.Login(ctx, phone, code)
	if err != nil {
		t.Fatal(err)
	}
	if len(token) < 22 { // 128 bits in base64url is 22 characters; ours are 256 bits
		t.Fatalf("token %q is too short", token)
	}
	if u.Phone != phone || u.Role != user.RoleUSER {
		t.Fatalf("user = %+v", u)
	}
	if n := db.Ent.User.Query().CountX(ctx); n != 1 {
		t.Fatalf("%d users after first login, want 1", n)
	}
	// The code is burnt: a replay fails.
	if _, _, err := svc.Login(ctx, phone, code); err == nil {
		t.Fatal("login code replay accepted")
	}

	// Authenticate slides the TTL back to the full 30 minutes.
	ttl, _ := svc.SessionTTL(ctx, token)
	if ttl < 29*time.Minute {
		t.Fatalf("fresh session TTL = %v", ttl)
	}
	key := svc.SessionKey(token)
	if rdb.Exists(ctx, token).Val() != 0 || rdb.Exists(ctx, key).Val() != 1 {
		t.Fatal("the session must be stored under the token's hash, not the token")
	}
	rdb.PExpire(ctx, key, 5*time.Second)
	sess, err := svc.Authenticate(ctx, token)
	if err != nil || sess == nil || sess.UserID != u.ID {
		t.Fatalf("authenticate: %+v, %v", sess, err)
	}
	if ttl, _ := svc.SessionTTL(ctx, token); ttl < 29*time.Minute {
		t.Fatalf("TTL after a request = %v, want slid back to 30m", ttl)
	}

	// Garbage and unknown tokens are anonymous, not errors.
	for _, bad := range []string{"", "x", token[:len(token)-1] + "A", "../../etc/passwd"} {
		if s, err := svc.Authenticate(ctx, bad); s != nil && bad != token || err != nil {
			t.Fatalf("token %q: session %+v, err %v", bad, s, err)
		}
	}

	if ok, err := svc.Logout(ctx, token); !ok || err != nil {
		t.Fatalf("logout: %v %v", ok, err)
	}
	if s, _ := svc.Authenticate(ctx, token); s != nil {
		t.Fatal("session survived logout")
	}
	if ok, _ := svc.Logout(ctx, token); ok {
		t.Fatal("second logout reported a session")
	}

	// A second login reuses the user.
	rdb.Del(ctx, svc.PhoneKeys(phone)[1])
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	if _, u2, err := svc.Login(ctx, phone, sender.code(phone)); err != nil || u2.ID != u.ID {
		t.Fatalf("second login: %v, %v", u2, err)
	}
}

func TestAdminPhonesGetAdminRole(t *testing.T) { testenv.EachRedis(t, testAdminPhonesGetAdminRole) }

func testAdminPhonesGetAdminRole(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	admin := testenv.Phone()
	svc, sender, _ := newService(t, rdb, auth.Options{AdminPhones: []string{admin}})
	if _, err := svc.SendCode(ctx, admin); err != nil {
		t.Fatal(err)
	}
	token, u, err := svc.Login(ctx, admin, sender.code(admin))
	if err != nil {
		t.Fatal(err)
	}
	if u.Role != user.RoleADMIN {
		t.Fatalf("role = %s, want ADMIN", u.Role)
	}
	if s, _ := svc.Authenticate(ctx, token); s == nil || !s.IsAdmin() {
		t.Fatalf("session %+v is not admin", s)
	}
}

// loginFor logs a fresh phone in on svc and returns its token.
func loginFor(t *testing.T, svc *auth.Service, sender *captureSender) string {
	t.Helper()
	ctx := context.Background()
	phone := testenv.Phone()
	if _, err := svc.SendCode(ctx, phone); err != nil {
		t.Fatal(err)
	}
	token, _, err := svc.Login(ctx, phone, sender.code(phone))
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// A logout through one server is honoured by another (two Services sharing Redis and the
// deployment, as two processes do) within the other's SessionCache; through the server
// itself at once.
func TestLogoutHonouredAcrossServersWithinSessionCache(t *testing.T) {
	testenv.EachRedis(t, testLogoutHonouredAcrossServers)
}

func testLogoutHonouredAcrossServers(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	const bound = 300 * time.Millisecond
	a, sender, db := newService(t, rdb, auth.Options{SessionCache: bound})
	b := sibling(rdb, a, db, auth.Options{SessionCache: bound})
	token := loginFor(t, a, sender)
	for _, svc := range []*auth.Service{a, b} {
		if s, err := svc.Authenticate(ctx, token); s == nil || err != nil {
			t.Fatalf("before logout: %v, %v", s, err)
		}
	}
	if ok, err := a.Logout(ctx, token); !ok || err != nil {
		t.Fatalf("logout: %v %v", ok, err)
	}
	if s, _ := a.Authenticate(ctx, token); s != nil {
		t.Fatal("the server that logged out still answers the session")
	}
	loggedOut := time.Now()
	for {
		s, err := b.Authenticate(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		if s == nil {
			break
		}
		if time.Since(loggedOut) > bound {
			t.Fatalf("the other server still answers the session %v after the logout (bound %v)", time.Since(loggedOut), bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A session is slid at most once per SlideEvery by one process; with a negative SlideEvery on
// every request read from Redis.
func TestSessionSlidesAtMostOncePerSlideEvery(t *testing.T) {
	testenv.EachRedis(t, testSessionSlides)
}

func testSessionSlides(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	const slide = 400 * time.Millisecond
	svc, sender, db := newService(t, rdb, auth.Options{SessionCache: -1, SlideEvery: slide})
	token := loginFor(t, svc, sender)
	key := svc.SessionKey(token)
	ttl := func() time.Duration { return rdb.PTTL(ctx, key).Val() }
	authenticate := func(svc *auth.Service) {
		t.Helper()
		if s, err := svc.Authenticate(ctx, token); s == nil || err != nil {
			t.Fatalf("authenticate: %v, %v", s, err)
		}
	}
	authenticate(svc) // login slid it just now: not again before SlideEvery
	rdb.PExpire(ctx, key, 10*time.Second)
	authenticate(svc)
	if got := ttl(); got > 10*time.Second {
		t.Fatalf("TTL = %v: slid again within SlideEvery", got)
	}
	time.Sleep(slide)
	authenticate(svc)
	if got := ttl(); got < 29*time.Minute {
		t.Fatalf("TTL = %v after SlideEvery: not slid", got)
	}
	every := sibling(rdb, svc, db, auth.Options{SessionCache: -1, SlideEvery: -1})
	authenticate(every)
	rdb.PExpire(ctx, key, 10*time.Second)
	authenticate(every)
	if got := ttl(); got < 29*time.Minute {
		t.Fatalf("TTL = %v with SlideEvery < 0: not slid on every request", got)
	}
}
