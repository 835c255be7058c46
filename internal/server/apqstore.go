package server

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

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
}

const (
	defaultAPQTTL      = 24 * time.Hour
	defaultAPQMaxBytes = 32 << 10
	defaultAPQTimeout  = 500 * time.Millisecond
)

// APQStore keeps the documents of automatic persisted queries in Redis, by their SHA-256.
type APQStore struct {
	rdb  redis.UniversalClient
	opts APQOptions
}

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
	return &APQStore{rdb: rdb, opts: o}
}

func (s *APQStore) key(hash string) string { return s.opts.Prefix + ":apq:" + hash }

// Get returns the document stored under hash and renews its TTL (one GETEX); ok is false when
// there is none.
func (s *APQStore) Get(ctx context.Context, hash string) (doc string, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	doc, err = redisctx.Do(ctx, s.rdb, func(ctx context.Context) (string, error) {
		return s.rdb.GetEx(ctx, s.key(hash), s.opts.TTL).Result()
	})
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return doc, err == nil, err
}

// Put stores doc under hash (which the caller checked), unless doc is over MaxBytes.
func (s *APQStore) Put(ctx context.Context, hash, doc string) error {
	if len(doc) > s.opts.MaxBytes {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return redisctx.Err(ctx, s.rdb, func(ctx context.Context) error {
		return s.rdb.Set(ctx, s.key(hash), doc, s.opts.TTL).Err()
	})
}
