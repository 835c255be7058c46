// Package auth implements phone-code login with sessions in Redis, in the shape of the
// well-known Redis session design: a short-lived code per phone with a wrong-try limit, send
// limits, and an opaque random token whose session hash slides while it is in use (at most once
// per Options.SlideEvery per process) and ends at the latest Options.SessionMaxAge after the
// login. Each process remembers the sessions it read for Options.SessionCache (1 s), so a busy
// client costs Redis one read per second per server; a logout or a revocation through another
// server is honoured here within that bound. A subscription lives as long as its session
// (Watch): each process reads the sessions of its open subscriptions every SessionCache in one
// pipeline and ends those whose session ended.
//
// The role is not part of the session: it is the phone's role in Options.AdminPhones, looked up
// on every request, so removing an admin takes effect on the next request after a restart
// (SyncRoles brings the users table in line at start). Each user's sessions are listed in a
// capped index, so they can be listed (Sessions) and ended together (RevokeSessions).
//
// Sends are limited three ways, because each one costs an SMS: per phone by an escalating
// cooldown (never a quota an attacker could use up to lock the owner out), per client address
// and server-wide by fixed windows. The server-wide windows are two, for phones of existing
// users and for new phones, so that sends to numbers nobody registered (the cheap way to use
// the window up) never lock returning users out; and a send the phone's cooldown refuses counts
// in neither. Wrong guesses lock the code, and past WrongTriesPerDay wrong guesses in a day a
// phone's codes allow one try each: the owner, who has the code, still logs in.
//
// Redis keys, each under "<Options.Namespace>:" (the phone is the hash tag, so each script's
// keys share a Cluster slot):
//
//	login:code:{<phone>}          hash {code, tries, deployment}, TTL CodeTTL
//	login:guess:{<phone>}         wrong tries of the phone, TTL 24 h from the first
//	login:send:{<phone>}:gap      send cooldown marker, TTL the current cooldown
//	login:send:{<phone>}:streak   sends of the current streak, TTL StreakWindow (slides)
//	login:send:client:{<address>} sends from one client address in the window, TTL its window
//	login:send:all                sends to phones of existing users in the window, TTL its window
//	login:send:new                sends to phones of no user yet in the window, TTL its window
//	login:token:<sha256(token)>   session hash {id, phone, nickname, icon, created, deployment},
//	                              TTL SessionTTL (slides), refused after SessionMaxAge
//	login:sessions:{<user id>}    sorted set of the user's sessions (sha256 hex by creation
//	                              time), at most MaxSessionsPerUser, TTL SessionMaxAge
//
// The token itself is never stored: a Redis dump does not hand out live sessions.
//
// Codes and sessions record the deployment that minted them (Options.Deployment), and are
// refused by any other: two deployments given the same namespace by mistake share these keys,
// yet one's token or code never logs anyone in on the other. A refusal is "no session" or "no
// valid code" to the client, a WARN line and surge_auth_foreign_refused_total{kind} here.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/schema"
	"github.com/surgekit/surge/ent/user"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/autopipe"
	"github.com/surgekit/surge/lua"
)

// CodeSender delivers a login code to a phone (SMS in a real deployment).
type CodeSender interface {
	Send(ctx context.Context, phone, code string) error
}

// Rate is a number of events per fixed window; the zero Rate is no limit.
type Rate struct {
	Count  int
	Window time.Duration
}

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.Count <= 0 || r.Window <= 0 }

// Options tunes the limits. Zero values take the documented defaults.
type Options struct {
	CodeTTL  time.Duration // how long a code is valid (2 min)
	MaxTries int           // wrong tries before a code locks (5)
	// WrongTriesPerDay is the wrong tries a phone gets at MaxTries per code in 24 h (from its
	// first wrong try; 10); past it, each code allows one try until those 24 h end.
	WrongTriesPerDay int
	// SendInterval is the cooldown after a send to one phone (60 s) for the first FreeSends
	// sends of a streak (3); each further send doubles it, up to MaxSendInterval (15 min).
	// A streak ends when no code was sent to the phone for StreakWindow (24 h).
	SendInterval    time.Duration
	FreeSends       int
	MaxSendInterval time.Duration
	StreakWindow    time.Duration
	// SendsPerClient bounds sends per client address (ClientAddress of the context); every
	// attempt counts, refused or not. SendsGlobal bounds the deployment's sends to phones of
	// existing users, SendsNew those to phones of no user yet; attempts the phone's cooldown
	// refuses count in neither. Zero Rates do not limit.
	SendsPerClient Rate
	SendsGlobal    Rate
	SendsNew       Rate
	SessionTTL     time.Duration // idle time after which a session ends (30 min)
	// SessionMaxAge is how long after its login a session ends, however busy (24 h).
	SessionMaxAge time.Duration
	// MaxSessionsPerUser bounds the sessions a user holds; a login past it ends the oldest (10).
	MaxSessionsPerUser int
	// SessionCache is how long this process answers a token from memory after reading its
	// session from Redis (1 s; negative: never). A logout through this process is honoured at
	// once; one through another server of the deployment within SessionCache.
	SessionCache time.Duration
	// SlideEvery is how often, at most, this process slides a session's TTL (PEXPIRE) while
	// it is in use (min(1 min, SessionTTL/10); negative: on every request). An idle session
	// so ends between SessionTTL − SlideEvery and SessionTTL after its last request.
	SlideEvery  time.Duration
	AdminPhones []string   // phones with role ADMIN, on every request
	DevMode     bool       // expose codes in SendCode's result (never in production)
	Sender      CodeSender // LogSender by default
	// Pipe, when set, sends the session lookups of concurrent requests in shared pipelines
	// (one round trip for many requests under load). nil: one round trip per request.
	Pipe *autopipe.Pipeliner
	// Namespace starts every key ("<ns>:login:…"), so deployments can share a Redis. ("": keys
	// start with "login:")
	Namespace string
	// Deployment identifies the deployment minting codes and sessions; those of another
	// deployment are refused. Every server of a deployment must share it. ("": unnamed)
	Deployment string
	Logger     *slog.Logger // WARN lines for refused foreign codes and sessions (slog.Default)
	// Registerer receives surge_auth_foreign_refused_total and surge_auth_code_sends_total (none).
	Registerer prometheus.Registerer
}

func (o *Options) setDefaults() {
	if o.CodeTTL <= 0 {
		o.CodeTTL = 2 * time.Minute
	}
	if o.MaxTries <= 0 {
		o.MaxTries = 5
	}
	if o.WrongTriesPerDay <= 0 {
		o.WrongTriesPerDay = 10
	}
	if o.SendInterval <= 0 {
		o.SendInterval = 60 * time.Second
	}
	if o.FreeSends <= 0 {
		o.FreeSends = 3
	}
	if o.MaxSendInterval < o.SendInterval {
		o.MaxSendInterval = max(15*time.Minute, o.SendInterval)
	}
	if o.StreakWindow <= 0 {
		o.StreakWindow = 24 * time.Hour
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 30 * time.Minute
	}
	if o.SessionMaxAge <= 0 {
		o.SessionMaxAge = 24 * time.Hour
	}
	if o.MaxSessionsPerUser <= 0 {
		o.MaxSessionsPerUser = 10
	}
	if o.SessionCache == 0 {
		o.SessionCache = time.Second
	}
	if o.SlideEvery == 0 {
		o.SlideEvery = min(time.Minute, o.SessionTTL/10)
	}
	o.SlideEvery = min(o.SlideEvery, o.SessionTTL/2) // a session in use never lapses
	if o.Sender == nil {
		o.Sender = LogSender{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Service issues codes, logs users in and resolves tokens to sessions.
type Service struct {
	rdb     redis.UniversalClient
	db      *ent.Client
	opts    Options
	admins  map[string]bool
	keys    Keyspace
	foreign *prometheus.CounterVec // refusals of another deployment's code or session
	sends   *prometheus.CounterVec // codes handed to the CodeSender, by result
	recent  *lru.Cache[[sha256.Size]byte, recentSession]
	watch   *watcher // the sessions of open subscriptions (Watch)
}

// recentSession is what this process last read of a session (by the SHA-256 of its token):
// answered from memory until read+SessionCache (never past end), slid again after
// slid+SlideEvery.
type recentSession struct {
	session         *Session
	read, slid, end time.Time
}

// recentSessions bounds the sessions remembered (≈ 150 bytes each); the least recently
// used go first.
const recentSessions = 1 << 16

// New returns a Service. rdb may be a single node or a Cluster client.
func New(rdb redis.UniversalClient, db *ent.Client, opts Options) *Service {
	opts.setDefaults()
	admins := make(map[string]bool, len(opts.AdminPhones))
	for _, p := range opts.AdminPhones {
		admins[strings.TrimSpace(p)] = true
	}
	recent, _ := lru.New[[sha256.Size]byte, recentSession](recentSessions) // only a size ≤ 0 fails
	s := &Service{rdb: rdb, db: db, opts: opts, admins: admins,
		keys: KeysIn(opts.Namespace), foreign: newForeignCounter(opts.Registerer),
		sends: newSendCounter(opts.Registerer), recent: recent}
	s.watch = newWatcher(s, opts.Registerer)
	return s
}

// Options returns the effective options (defaults filled in).
func (s *Service) Options() Options { return s.opts }

// SentCode is the result of SendCode.
type SentCode struct {
	ExpiresIn  time.Duration
	RetryAfter time.Duration
	DevCode    string // set in dev mode only
}

// ValidatePhone rejects anything that is not a mainland-China mobile number.
func ValidatePhone(phone string) error {
	if !schema.PhonePattern.MatchString(phone) {
		return apperr.Invalid("phone", "invalid phone number: expected 11 digits like 13812345678")
	}
	return nil
}

// SendCode creates a code for phone and hands it to the CodeSender, unless a send limit
// refuses it (RATE_LIMITED, saying when to retry).
func (s *Service) SendCode(ctx context.Context, phone string) (*SentCode, error) {
	if err := ValidatePhone(phone); err != nil {
		return nil, err
	}
	keys := s.PhoneKeys(phone)
	if err := s.checkSendRates(ctx, phone, keys[phoneGap]); err != nil {
		return nil, err
	}
	code, err := randomCode()
	if err != nil {
		return nil, err
	}
	res, err := lua.LoginSendCode(lua.LoginCodeKeys{Code: keys[phoneCode], Gap: keys[phoneGap], Streak: keys[phoneStreak]}, lua.LoginCode{
		Code: code, TTL: s.opts.CodeTTL, Cooldown: s.opts.SendInterval, MaxCooldown: s.opts.MaxSendInterval,
		FreeSends: s.opts.FreeSends, Streak: s.opts.StreakWindow, Deployment: s.opts.Deployment,
	}).Run(ctx, s.rdb)
	if err != nil {
		return nil, fmt.Errorf("auth: storing login code: %w", err)
	}
	cooldown := res.Cooldown
	if !res.Stored {
		return nil, rateLimited("a code was sent to this phone recently", cooldown)
	}
	if err := s.opts.Sender.Send(ctx, phone, code); err != nil {
		s.sends.WithLabelValues(sendFailed).Inc()
		// Give the cooldown and the streak's send back so the user can retry at once.
		bg := context.WithoutCancel(ctx)
		s.rdb.Del(bg, keys[phoneCode], keys[phoneGap])
		s.rdb.Decr(bg, keys[phoneStreak])
		return nil, fmt.Errorf("auth: sending login code: %w", err)
	}
	s.sends.WithLabelValues(sendSent).Inc()
	out := &SentCode{ExpiresIn: s.opts.CodeTTL, RetryAfter: cooldown}
	if s.opts.DevMode {
		out.DevCode = code
	}
	return out, nil
}

// checkSendRates counts this send against the client's window, then (unless the phone's
// cooldown runs: gap is its marker) against the server-wide window of its kind of phone.
func (s *Service) checkSendRates(ctx context.Context, phone, gap string) error {
	if addr := ClientAddress(ctx); addr != "" && !s.opts.SendsPerClient.Off() {
		if err := s.countSend(ctx, s.keys.clientSends(addr), s.opts.SendsPerClient, "from this address"); err != nil {
			return err
		}
	}
	if s.opts.SendsGlobal.Off() && s.opts.SendsNew.Off() {
		return nil
	}
	// The phone's cooldown first, so that a client sending to the same phone again and again
	// is refused here, without using up the window every user shares. (login_send_code.lua
	// checks it again, atomically: this read only spares the window.)
	left, err := s.rdb.PTTL(ctx, gap).Result()
	if err != nil {
		return fmt.Errorf("auth: reading the send cooldown: %w", err)
	}
	if left > 0 {
		return rateLimited("a code was sent to this phone recently", left)
	}
	// Phones nobody registered are the cheap way to fill a window (any number will do), so
	// they have their own: sign-ups may be refused for a while, returning users are not.
	known, err := s.db.User.Query().Where(user.Phone(phone)).Exist(ctx)
	if err != nil {
		return fmt.Errorf("auth: looking up the phone's user: %w", err)
	}
	switch {
	case known && !s.opts.SendsGlobal.Off():
		return s.countSend(ctx, s.keys.allSends(), s.opts.SendsGlobal, "server-wide: the service is busy")
	case !known && !s.opts.SendsNew.Off():
		return s.countSend(ctx, s.keys.newSends(), s.opts.SendsNew, "server-wide for new phones: sign-ups are busy")
	}
	return nil
}

func (s *Service) countSend(ctx context.Context, key string, r Rate, scope string) error {
	res, err := lua.RateWindow(key, r.Count, r.Window).Run(ctx, s.rdb)
	if err != nil {
		return fmt.Errorf("auth: counting login code sends: %w", err)
	}
	if !res.Allowed {
		return rateLimited(fmt.Sprintf("too many login codes requested %s (at most %d per %s)", scope, r.Count, r.Window), res.RetryIn)
	}
	return nil
}

func rateLimited(why string, retry time.Duration) error {
	secs := int((retry + time.Second - 1) / time.Second)
	return apperr.New(apperr.RateLimited, "%s; retry in %d s", why, secs)
}

// Login checks the code and returns a new session token for the (possibly new) user.
func (s *Service) Login(ctx context.Context, phone, code string) (string, *ent.User, error) {
	if err := ValidatePhone(phone); err != nil {
		return "", nil, err
	}
	if len(code) != 6 || strings.Trim(code, "0123456789") != "" {
		return "", nil, apperr.Invalid("code", "invalid code: expected 6 digits")
	}
	res, err := lua.LoginVerifyCode(lua.LoginVerifyKeys{Code: s.keys.code(phone), Guesses: s.keys.guesses(phone)}, lua.LoginVerify{
		Code: code, MaxTries: s.opts.MaxTries, PerWindow: s.opts.WrongTriesPerDay, Window: guessWindow, Deployment: s.opts.Deployment,
	}).Run(ctx, s.rdb)
	if err != nil {
		return "", nil, fmt.Errorf("auth: checking login code: %w", err)
	}
	switch res {
	case lua.CodeWrong:
		return "", nil, apperr.Invalid("code", "wrong code")
	case lua.CodeForeign:
		s.refuseForeign(ctx, kindCode, "phone", MaskPhone(phone))
		fallthrough // the client learns nothing about the other deployment
	case lua.CodeMissing:
		return "", nil, apperr.Invalid("code", "no valid code for this phone: request a new one")
	case lua.CodeLocked:
		return "", nil, apperr.Invalid("code", "too many wrong tries: request a new code")
	case lua.CodeCapped:
		return "", nil, apperr.Invalid("code", "too many wrong tries for this phone today: request a new code; each allows one try for now")
	}
	u, err := s.upsertUser(ctx, phone)
	if err != nil {
		return "", nil, err
	}
	token, err := s.startSession(ctx, u)
	if err != nil {
		return "", nil, err
	}
	return token, u, nil
}

// guessWindow is the window of Options.WrongTriesPerDay, fixed from the phone's first wrong try.
const guessWindow = 24 * time.Hour

// upsertUser finds or creates the user and applies the configured role.
func (s *Service) upsertUser(ctx context.Context, phone string) (*ent.User, error) {
	role := s.roleOf(phone)
	for attempt := 0; attempt < 2; attempt++ {
		u, err := s.db.User.Query().Where(user.Phone(phone)).Only(ctx)
		switch {
		case err == nil:
			if u.Role != role {
				return u.Update().SetRole(role).Save(ctx)
			}
			return u, nil
		case !ent.IsNotFound(err):
			return nil, fmt.Errorf("auth: loading user: %w", err)
		}
		u, err = s.db.User.Create().SetPhone(phone).SetNickname(defaultNickname()).SetRole(role).Save(ctx)
		if err == nil {
			return u, nil
		}
		if !ent.IsConstraintError(err) {
			return nil, fmt.Errorf("auth: creating user: %w", err)
		}
		// A concurrent first login created the user; read it back.
	}
	return nil, errors.New("auth: user upsert did not converge")
}

// Session is the user snapshot stored under a token, with the role the phone has now.
type Session struct {
	UserID   int
	Phone    string
	Nickname string
	Icon     string
	Role     user.Role // from Options.AdminPhones at the request, not from the login
}

// IsAdmin reports whether the session's user has role ADMIN.
func (s *Session) IsAdmin() bool { return s.Role == user.RoleADMIN }

// Authenticate resolves a token to its session and slides the session's TTL (at most once per
// SlideEvery). A session read from Redis less than SessionCache ago is answered from memory.
// It returns (nil, nil) when the token is unknown, idle too long, revoked or older than
// SessionMaxAge.
func (s *Service) Authenticate(ctx context.Context, token string) (*Session, error) {
	if !plausibleToken(token) {
		return nil, nil
	}
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	last, known := s.recent.Get(sum)
	if known && now.Sub(last.read) < s.opts.SessionCache && now.Before(last.end) {
		return last.session, nil
	}
	var r *sessionRead
	var err error
	add := func(p redis.Pipeliner) { r = s.readSession(ctx, p, sum, now) }
	if s.opts.Pipe != nil {
		if err = s.opts.Pipe.Do(ctx, add); err == nil {
			err = r.get.Err()
		}
	} else {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { add(p); return nil })
	}
	if err != nil {
		return nil, fmt.Errorf("auth: loading session: %w", err)
	}
	return s.settle(ctx, r), nil
}

// sessionRead is one read of a session from Redis, queued in a pipeline by readSession and
// interpreted by settle.
type sessionRead struct {
	sum   [sha256.Size]byte
	last  recentSession // what this process remembered of it (zero: nothing)
	slide bool          // the read slides the session's TTL too
	now   time.Time
	get   *redis.MapStringStringCmd
}

// readSession queues in p the read of a session (by the SHA-256 of its token) and, if this
// process last slid it SlideEvery ago or more, the slide of its TTL.
func (s *Service) readSession(ctx context.Context, p redis.Pipeliner, sum [sha256.Size]byte, now time.Time) *sessionRead {
	last, known := s.recent.Get(sum)
	r := &sessionRead{sum: sum, last: last, slide: !known || now.Sub(last.slid) >= s.opts.SlideEvery, now: now}
	key := s.keys.session(sum)
	r.get = p.HGetAll(ctx, key)
	if r.slide {
		p.PExpire(ctx, key, s.opts.SessionTTL)
	}
	return r
}

// settle turns a session read into the Session, remembered for SessionCache, or nil when
// there is none: unknown, idle too long, revoked, another deployment's, or older than
// SessionMaxAge (then deleted).
func (s *Service) settle(ctx context.Context, r *sessionRead) *Session {
	m, sum := r.get.Val(), r.sum
	id, err := strconv.Atoi(m["id"])
	created, errCreated := strconv.ParseInt(m[createdField], 10, 64)
	if len(m) == 0 || err != nil || errCreated != nil { // no created: minted before sessions had an end
		s.recent.Remove(sum)
		return nil
	}
	if m[deploymentField] != s.opts.Deployment {
		s.recent.Remove(sum)
		s.refuseForeign(ctx, kindSession, "minted_by", m[deploymentField])
		return nil
	}
	// The end counts from the login with today's SessionMaxAge, so shortening it ends the
	// sessions already older at once. (A slide just now may have renewed the key: it goes.)
	end := time.UnixMilli(created).Add(s.opts.SessionMaxAge)
	if !r.now.Before(end) {
		s.recent.Remove(sum)
		if err := s.endSessions(ctx, id, sum); err != nil {
			s.opts.Logger.WarnContext(ctx, "auth: deleting a session past its lifetime", "err", err)
		}
		return nil
	}
	sess := &Session{UserID: id, Phone: m["phone"], Nickname: m["nickname"], Icon: m["icon"], Role: s.roleOf(m["phone"])}
	entry := recentSession{session: sess, read: r.now, slid: r.last.slid, end: end}
	if r.slide {
		entry.slid = r.now
	}
	s.recent.Add(sum, entry)
	return sess
}

// Logout ends the session of token. It reports whether a session existed. This process
// forgets the session at once (a request of token reading Redis at that very moment may
// remember it for SessionCache more); other servers within their SessionCache.
func (s *Service) Logout(ctx context.Context, token string) (bool, error) {
	if !plausibleToken(token) {
		return false, nil
	}
	sum := sha256.Sum256([]byte(token))
	key := s.keys.session(sum)
	var id *redis.StringCmd
	var del *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		id = p.HGet(ctx, key, "id")
		del = p.Del(ctx, key)
		return nil
	})
	s.recent.Remove(sum) // also when Redis failed: the next request asks Redis
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("auth: deleting session: %w", err)
	}
	s.watch.sessionEnded(sum)
	if uid, err := strconv.Atoi(id.Val()); err == nil {
		// Off the user's index too; left there, it would only wait for the index's pruning.
		// (The session is gone either way: a failure here is no reason to fail the logout.)
		if err := s.rdb.ZRem(ctx, s.keys.sessions(uid), hex.EncodeToString(sum[:])).Err(); err != nil {
			s.opts.Logger.WarnContext(ctx, "auth: unlisting a logged-out session", "err", err)
		}
	}
	return del.Val() > 0, nil
}

// SessionTTL returns the remaining lifetime of token's session (for tests and diagnostics).
func (s *Service) SessionTTL(ctx context.Context, token string) (time.Duration, error) {
	return s.rdb.PTTL(ctx, s.SessionKey(token)).Result()
}

// deploymentField names the deployment that minted a code or a session, in its hash.
const deploymentField = "deployment"

// createdField is the session's login time (Unix ms), from which SessionMaxAge counts.
const createdField = "created"

// Kinds of foreign credentials, the label of surge_auth_foreign_refused_total.
const (
	kindCode    = "code"
	kindSession = "session"
)

func newForeignCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return newCounter(reg, "surge_auth_foreign_refused_total",
		"Login codes and sessions refused because another deployment minted them (two deployments under one namespace).",
		"kind", kindCode, kindSession)
}

// Results of a send, the label of surge_auth_code_sends_total.
const (
	sendSent   = "sent"
	sendFailed = "failed"
)

func newSendCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return newCounter(reg, "surge_auth_code_sends_total",
		"Login codes handed to the code sender (SMS gateway, webhook, log), by result: sent, or failed (the user saw an error and may retry at once).",
		"result", sendSent, sendFailed)
}

// newCounter is a counter with one label whose series all exist from the start, at 0,
// registered with reg (if any).
func newCounter(reg prometheus.Registerer, name, help, label string, values ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	for _, v := range values {
		c.WithLabelValues(v)
	}
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// refuseForeign counts and logs a code or session of another deployment: a sign that two
// deployments share a namespace, or that someone tries one deployment's credentials on another.
func (s *Service) refuseForeign(ctx context.Context, kind string, attrs ...any) {
	s.foreign.WithLabelValues(kind).Inc()
	s.opts.Logger.WarnContext(ctx, "refused a login "+kind+" of another deployment: give each deployment its own SURGE_NAMESPACE",
		append([]any{"deployment", s.opts.Deployment}, attrs...)...)
}

// Indexes of PhoneKeys.
const (
	phoneCode    = iota // the code hash
	phoneGap            // the cooldown marker
	phoneStreak         // the streak's send count
	phoneGuesses        // the wrong tries of the day
)

// PhoneKeys are the Redis keys the login flow keeps per phone: the code, the cooldown marker,
// the streak's send count (login_send_code.lua's KEYS, in that order) and the wrong tries.
func (s *Service) PhoneKeys(phone string) []string { return s.keys.Phone(phone) }

// SessionKey is the Redis key of token's session: a SHA-256 of the token, never the token.
func (s *Service) SessionKey(token string) string { return s.keys.Session(token) }

// SessionsKey is the Redis key of the user's index of sessions.
func (s *Service) SessionsKey(userID int) string { return s.keys.sessions(userID) }

// Keyspace names the login keys of one namespace, for the Service and for tools that clean up
// after simulated users (surge bench seckill).
type Keyspace struct{ prefix string } // "login:" or "<ns>:login:"

// KeysIn returns the login keys under namespace ("": the keys start with "login:").
func KeysIn(namespace string) Keyspace {
	if namespace == "" {
		return Keyspace{prefix: "login:"}
	}
	return Keyspace{prefix: namespace + ":login:"}
}

// Phone returns the keys kept per phone: the code, the cooldown marker, the streak's count,
// the wrong tries.
func (k Keyspace) Phone(phone string) []string {
	send := k.prefix + "send:{" + phone + "}:"
	return []string{k.code(phone), send + "gap", send + "streak", k.guesses(phone)}
}

// Session returns the key of token's session: a SHA-256 of the token, never the token.
func (k Keyspace) Session(token string) string { return k.session(sha256.Sum256([]byte(token))) }

func (k Keyspace) session(sum [sha256.Size]byte) string {
	return k.prefix + "token:" + hex.EncodeToString(sum[:])
}

func (k Keyspace) code(phone string) string    { return k.prefix + "code:{" + phone + "}" }
func (k Keyspace) guesses(phone string) string { return k.prefix + "guess:{" + phone + "}" }

// sessions is the user's index of sessions.
func (k Keyspace) sessions(userID int) string {
	return k.prefix + "sessions:{" + strconv.Itoa(userID) + "}"
}

// Send windows per client address and of the whole deployment (its namespace): for phones of
// existing users, and for new phones.
func (k Keyspace) allSends() string               { return k.prefix + "send:all" }
func (k Keyspace) newSends() string               { return k.prefix + "send:new" }
func (k Keyspace) clientSends(addr string) string { return k.prefix + "send:client:{" + addr + "}" }

const tokenBytes = 32 // 256 bits of randomness

func randomToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("auth: random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// plausibleToken filters out garbage before it reaches Redis.
func plausibleToken(t string) bool {
	return len(t) == base64.RawURLEncoding.EncodedLen(tokenBytes) && strings.Trim(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}

func randomCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", fmt.Errorf("auth: random code: %w", err)
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

func defaultNickname() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "user_" + hex.EncodeToString(b)
}

// MaskPhone hides the middle digits of a phone for logs: 138****5678.
func MaskPhone(p string) string {
	if len(p) != 11 {
		return "***"
	}
	return p[:3] + "****" + p[7:]
}
