package auth

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/apperr"
)

// A subscription outlives the request that authenticated it: it runs as long as its socket
// stays open. So that a logout, a revocation (RevokeSessions), the session's expiry or, for an
// admin-only subscription, the loss of the ADMIN role ends it as it ends the token's requests,
// each process watches the sessions of its open subscriptions (Watch): one goroutine reads
// them all from Redis every recheck interval (SessionCache, at least minRecheck) in one
// pipelined round trip (chunked by recheckBatch), one read per token however many
// subscriptions share it, and ends the subscriptions of a session that is gone. A logout or a
// revocation through this process ends them at once; through another server, within
// SessionCache and a round trip. The reads slide the sessions' TTLs as requests do (at most
// once per SlideEvery): an open subscription is the session in use.

var (
	// ErrSessionEnded ends a watched subscription whose session ended.
	ErrSessionEnded = apperr.New(apperr.Unauthenticated, "the session ended (logout, revocation or expiry): log in and subscribe again")
	// ErrAdminRevoked ends a watched admin-only subscription whose session lost the ADMIN role.
	ErrAdminRevoked = apperr.New(apperr.Forbidden, "admin role required: this session no longer has it")
)

// minRecheck bounds how often the sessions of open subscriptions are read (SessionCache off
// or shorter).
const minRecheck = 250 * time.Millisecond

// recheckBatch is how many sessions one pipeline reads.
const recheckBatch = 512

// recheckTimeout bounds one round of reads.
const recheckTimeout = 2 * time.Second

// watcher holds the open subscriptions of this process by session.
type watcher struct {
	s     *Service
	every time.Duration

	mu       sync.Mutex
	sessions map[[sha256.Size]byte]map[*watch]struct{}
	running  bool // the recheck goroutine

	ended  *prometheus.CounterVec // subscriptions ended, by reason
	rounds *prometheus.CounterVec // recheck rounds, by outcome
}

// watch is one subscription's registration.
type watch struct {
	w     *watcher
	sum   [sha256.Size]byte
	end   func(error)
	admin atomic.Bool // admin-only (WatchRole)
	once  sync.Once
}

func newWatcher(s *Service, reg prometheus.Registerer) *watcher {
	w := &watcher{s: s, every: max(s.opts.SessionCache, minRecheck), sessions: map[[sha256.Size]byte]map[*watch]struct{}{},
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_auth_subscriptions_ended_total",
			Help: "Subscriptions ended because their session ended (reason session_ended) or lost the ADMIN role an admin-only subscription needs (reason role_revoked).",
		}, []string{"reason"}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_auth_subscription_rechecks_total",
			Help: "Rounds of reading the sessions of open subscriptions, by outcome (ok, failed: Redis did not answer; the subscriptions run on until the next round).",
		}, []string{"outcome"}),
	}
	for _, r := range []string{reasonEnded, reasonRole} {
		w.ended.WithLabelValues(r)
	}
	for _, o := range []string{"ok", "failed"} {
		w.rounds.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(w.ended, w.rounds)
	}
	return w
}

const (
	reasonEnded = "session_ended"
	reasonRole  = "role_revoked"
)

type watchKey struct{}

// Watch keeps the subscription that runs with ctx while its session lasts: ctx carries the
// token and the session it resolved to (WithToken). When the session ends (logout,
// revocation, expiry; on this server at once, through another within SessionCache and a
// round trip), or an admin-only subscription's session loses the role (WatchRole), end is
// called once, with ErrSessionEnded or ErrAdminRevoked, and must end the subscription without
// blocking. Watch returns ctx with the registration (for WatchRole) and stop, which the
// caller calls when the subscription ends. Without a session in ctx nothing is watched.
func (s *Service) Watch(ctx context.Context, end func(error)) (context.Context, func()) {
	token := TokenFromContext(ctx)
	if token == "" || FromContext(ctx) == nil {
		return ctx, func() {}
	}
	wt := &watch{w: s.watch, sum: sha256.Sum256([]byte(token)), end: end}
	s.watch.add(wt)
	return context.WithValue(ctx, watchKey{}, wt), func() { s.watch.remove(wt) }
}

// WatchRole says that the operation running with ctx needs the ADMIN role: if it is a watched
// subscription (Watch), it ends when its session loses the role. The @admin directive calls
// it.
func WatchRole(ctx context.Context) {
	if wt, ok := ctx.Value(watchKey{}).(*watch); ok {
		wt.admin.Store(true)
	}
}

func (w *watcher) add(wt *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	subs := w.sessions[wt.sum]
	if subs == nil {
		subs = map[*watch]struct{}{}
		w.sessions[wt.sum] = subs
	}
	subs[wt] = struct{}{}
	if !w.running {
		w.running = true
		go w.recheckEvery()
	}
}

func (w *watcher) remove(wt *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if subs := w.sessions[wt.sum]; subs != nil {
		delete(subs, wt)
		if len(subs) == 0 {
			delete(w.sessions, wt.sum)
		}
	}
}

// sessionEnded ends the subscriptions of a session ended by this process (Logout,
// endSessions) at once.
func (w *watcher) sessionEnded(sum [sha256.Size]byte) {
	w.endWhere(sum, func(*watch) bool { return true }, ErrSessionEnded, reasonEnded)
}

// endWhere ends the subscriptions of sum that match, outside the lock (end may take locks of
// its own).
func (w *watcher) endWhere(sum [sha256.Size]byte, match func(*watch) bool, err error, reason string) {
	var ending []*watch
	w.mu.Lock()
	for wt := range w.sessions[sum] {
		if match(wt) {
			ending = append(ending, wt)
		}
	}
	w.mu.Unlock()
	for _, wt := range ending {
		wt.once.Do(func() {
			w.remove(wt)
			w.ended.WithLabelValues(reason).Inc()
			wt.end(err)
		})
	}
}

// recheckEvery reads the watched sessions every interval, until none is watched.
func (w *watcher) recheckEvery() {
	t := time.NewTicker(w.every)
	defer t.Stop()
	var sums [][sha256.Size]byte
	for range t.C {
		w.mu.Lock()
		if len(w.sessions) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		sums = sums[:0]
		for sum := range w.sessions {
			sums = append(sums, sum)
		}
		w.mu.Unlock()
		for len(sums) > 0 {
			n := min(len(sums), recheckBatch)
			w.recheck(sums[:n])
			sums = sums[n:]
		}
	}
}

// recheck reads the sessions of sums in one pipeline and ends the subscriptions of those that
// ended. A session Redis did not answer for is read again next round.
func (w *watcher) recheck(sums [][sha256.Size]byte) {
	ctx, cancel := context.WithTimeout(context.Background(), recheckTimeout)
	defer cancel()
	now := time.Now()
	reads := make([]*sessionRead, 0, len(sums))
	_, err := w.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sum := range sums {
			reads = append(reads, w.s.readSession(ctx, p, sum, now))
		}
		return nil
	})
	if err != nil {
		w.rounds.WithLabelValues("failed").Inc()
		w.s.opts.Logger.WarnContext(ctx, "auth: reading the sessions of open subscriptions", "sessions", len(sums), "err", err)
	} else {
		w.rounds.WithLabelValues("ok").Inc()
	}
	for _, r := range reads {
		if r.get.Err() != nil {
			continue
		}
		switch sess := w.s.settle(ctx, r); {
		case sess == nil:
			w.endWhere(r.sum, func(*watch) bool { return true }, ErrSessionEnded, reasonEnded)
		case !sess.IsAdmin():
			w.endWhere(r.sum, func(wt *watch) bool { return wt.admin.Load() }, ErrAdminRevoked, reasonRole)
		}
	}
}
