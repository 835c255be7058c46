package seckill

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/autopipe"
	"github.com/surgekit/surge/lua"
)

// admit runs the admission script, in a pipeline shared with concurrent grabs when
// Options.Pipelines > 0: batching adds no wait at low load and lifts throughput under load.
func (s *Service) admit(ctx context.Context, keys []string, args ...any) ([]any, error) {
	if s.pipe == nil {
		return lua.SeckillGrab.Run(ctx, s.rdb, keys, args...).Slice()
	}
	var cmd *redis.Cmd
	err := s.pipe.Do(ctx, func(p redis.Pipeliner) { cmd = lua.SeckillGrab.EvalSha(ctx, p, keys, args...) })
	if errors.Is(err, autopipe.ErrClosed) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, err
	}
	res, err := cmd.Slice()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		// Not cached on that node yet (first use, or a restart): Run loads it. The EVALSHA
		// failed before running anything, so this is no retry of a grab.
		return lua.SeckillGrab.Run(ctx, s.rdb, keys, args...).Slice()
	}
	return res, err
}
