package server

import (
	"context"
	"errors"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// APQOptions configures the store of automatic persisted queries.
type APQOptions struct {
	// Prefix starts every key: <Prefix>:apq:<sha256>. It is the deployment's namespace, so
	// that all servers of a deployment share their documents and no other deployment sees them.
	Prefix string
	// TTL is how long a document stays after its last use (24 h): each hit renews it, so the
	// documents of a live client stay while those of old releases go.
	TTL time.Duration
	// MaxBytes bounds a stored document (32 KiB): a larger one runs but is not stored, and its
	// client keeps sending it in full.
	MaxBytes int
	// Timeout bounds each Redis call (500 ms): a lookup that cannot answer is a miss (the
	// client sends the query again, in full), a store that cannot is skipped.
	Timeout time.Duration
	// PerClient and Global bound how many documents are stored per client address
	// (auth.ClientAddress of the request) and server-wide in a window: a client generating
	// distinct valid documents cannot fill Redis at its request rate. A registration over
	// either still runs; its document is not stored, and its client keeps sending it in
	// full. Legitimate clients register each document of an application once, and only the
	// first of them: the rest find it. Zero Rates do not limit.
	PerClient, Global auth.Rate
	// Registerer receives surge_apq_registrations_total{outcome}; nil registers nothing.
	Registerer prometheus.Registerer
}

const (
	defaultAPQTTL      = 24 * time.Hour
	defaultAPQMaxBytes = 32 << 10
	defaultAPQTimeout  = 500 * time.Millisecond
)

// APQStore keeps the documents of automatic persisted queries in Redis, by their SHA-256,
// and the ones this server used lately in memory too: a document never changes under its
// hash, so a hit in memory is as good as one in Redis and saves the round trip. Those are
// renewed in Redis at most once per renewEvery.
type APQStore struct {
	rdb           redis.UniversalClient
	opts          APQOptions
	recent        *lru.Cache[string, recentDocument]
	registrations *prometheus.CounterVec
}

// Outcomes of a registration (surge_apq_registrations_total).
const (
	apqStored      = "stored"
	apqTooLarge    = "too_large"    // over MaxBytes
	apqRateLimited = "rate_limited" // over PerClient or Global
	apqFailed      = "failed"       // Redis did not answer
)

// recentDocument is a document this server stored or found, and when it last renewed its TTL.
type recentDocument struct {
	doc     string
	renewed time.Time
}

// recentDocuments bounds the documents kept in memory (at most MaxBytes each).
const recentDocuments = 512

// renewEvery is how often a document in use is renewed in Redis: a small share of its TTL.
func (s *APQStore) renewEvery() time.Duration { return s.opts.TTL / 24 }

// NewAPQStore returns a store on rdb; zero options take their defaults.
func NewAPQStore(rdb redis.UniversalClient, o APQOptions) *APQStore {
	if o.TTL <= 0 {
		o.TTL = defaultAPQTTL
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultAPQMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultAPQTimeout
	}
	recent, _ := lru.New[string, recentDocument](recentDocuments) // only a size ≤ 0 fails
	s := &APQStore{rdb: rdb, opts: o, recent: recent, registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "surge_apq_registrations_total",
		Help: "Automatic persisted query registrations (a query sent with its hash), by outcome: stored, too_large, rate_limited, failed.",
	}, []string{"outcome"})}
	for _, outcome := range []string{apqStored, apqTooLarge, apqRateLimited, apqFailed} {
		s.registrations.WithLabelValues(outcome)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.registrations)
	}
	return s
}

func (s *APQStore) key(hash string) string { return s.opts.Prefix + ":apq:" + hash }

// Keys of the registration counters: per client address, and server-wide.
func (s *APQStore) clientKey(addr string) string { return s.opts.Prefix + ":apq-rate:client:" + addr }
func (s *APQStore) globalKey() string            { return s.opts.Prefix + ":apq-rate:all" }

// Get returns the document stored under hash and renews its TTL (one GETEX, unless this
// server found or stored it less than renewEvery ago: then from memory); ok is false when
// there is none.
func (s *APQStore) Get(ctx context.Context, hash string) (doc string, ok bool, err error) {
	now := time.Now()
	if r, hit := s.recent.Get(hash); hit && now.Sub(r.renewed) < s.renewEvery() {
		return r.doc, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	doc, err = redisctx.Do(ctx, s.rdb, func(ctx context.Context) (string, error) {
		return s.rdb.GetEx(ctx, s.key(hash), s.opts.TTL).Result()
	})
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	s.recent.Add(hash, recentDocument{doc: doc, renewed: now})
	return doc, true, nil
}

// Put stores doc under hash (which the caller checked), unless doc is over MaxBytes or the
// registration is over PerClient or Global (then it returns ErrAPQRateLimited).
func (s *APQStore) Put(ctx context.Context, hash, doc string) error {
	if len(doc) > s.opts.MaxBytes {
		s.registrations.WithLabelValues(apqTooLarge).Inc()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	err := s.countRegistration(ctx)
	if err == nil {
		now := time.Now()
		err = redisctx.Err(ctx, s.rdb, func(ctx context.Context) error {
			return s.rdb.Set(ctx, s.key(hash), doc, s.opts.TTL).Err()
		})
		if err == nil {
			s.recent.Add(hash, recentDocument{doc: doc, renewed: now})
		}
	}
	switch {
	case err == nil:
		s.registrations.WithLabelValues(apqStored).Inc()
	case errors.Is(err, ErrAPQRateLimited):
		s.registrations.WithLabelValues(apqRateLimited).Inc()
	default:
		s.registrations.WithLabelValues(apqFailed).Inc()
	}
	return err
}

// ErrAPQRateLimited: a registration over APQOptions.PerClient or Global was not stored.
var ErrAPQRateLimited = errors.New("persisted query not stored: too many registrations")

// countRegistration counts a registration against the client's window, then the global one.
func (s *APQStore) countRegistration(ctx context.Context) error {
	type window struct {
		key  string
		rate auth.Rate
	}
	var windows []window
	if addr := auth.ClientAddress(ctx); addr != "" && !s.opts.PerClient.Off() {
		windows = append(windows, window{s.clientKey(addr), s.opts.PerClient})
	}
	if !s.opts.Global.Off() {
		windows = append(windows, window{s.globalKey(), s.opts.Global})
	}
	for _, w := range windows {
		res, err := redisctx.Do(ctx, s.rdb, func(ctx context.Context) (lua.RateReply, error) {
			return lua.RateWindow(w.key, w.rate.Count, w.rate.Window).Run(ctx, s.rdb)
		})
		if err != nil {
			return err
		}
		if !res.Allowed {
			return ErrAPQRateLimited
		}
	}
	return nil
}
