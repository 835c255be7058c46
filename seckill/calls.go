package seckill

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// consumerCallTimeout bounds each Redis call of the consumer (none blocks by design), whatever
// the client's settings (package redisctx): a hung Redis holds a reader no longer than that,
// and a stopped consumer returns at once.
const consumerCallTimeout = 5 * time.Second

// bounded runs one Redis call of the consumer; it returns when ctx ends or at the latest
// consumerCallTimeout after it started.
func bounded[T any](ctx context.Context, rdb redis.UniversalClient, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	defer cancel()
	return redisctx.Do(ctx, rdb, call)
}

// boundedErr is bounded for a call that returns only an error.
func boundedErr(ctx context.Context, rdb redis.UniversalClient, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	defer cancel()
	return redisctx.Err(ctx, rdb, call)
}

func isNoGroup(err error) bool { return redis.HasErrorPrefix(err, "NOGROUP") }

// replyError reports whether err is an error answered by Redis (a wrong type, no group), not
// a failure to talk to it.
func replyError(err error) bool {
	var re redis.Error
	return err != nil && !errors.Is(err, redis.Nil) && errors.As(err, &re)
}
