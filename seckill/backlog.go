package seckill

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// backlogTimeout bounds the Redis reads of one scrape: a hung Redis leaves the two gauges out
// of that scrape rather than holding it.
const backlogTimeout = time.Second

var (
	backlogDesc = prometheus.NewDesc("surge_seckill_stream_backlog",
		"Admitted orders waiting in the order streams of all vouchers to be written to the database (every server reports the same; read at scrape time).", nil, nil)
	oldestDesc = prometheus.NewDesc("surge_seckill_stream_oldest_age_seconds",
		"How long the oldest order waiting in the streams has waited (0 when none): the order consumers' lag.", nil, nil)
)

// backlog reports the consumers' lag at each scrape, read from Redis: the entries of the
// order streams of the registered vouchers (entries leave a stream once persisted), and the
// age of the oldest by its stream id. A consumer that died or fell behind shows here even if
// it counts nothing itself.
type backlog struct{ s *Service }

func (backlog) Describe(ch chan<- *prometheus.Desc) { ch <- backlogDesc; ch <- oldestDesc }

func (b backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(b.s.bg.life, backlogTimeout)
	defer cancel()
	entries, oldest, err := b.s.streamBacklog(ctx)
	if err != nil {
		b.s.opts.Logger.Debug("reading the order streams' backlog", "err", err)
		return
	}
	age := 0.0
	if entries > 0 {
		age = max(0, b.s.opts.Clock().Sub(oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(entries))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
}

// streamBacklog counts the entries of the registered vouchers' order streams and finds the
// time of the oldest: one read of the registry, then one pipeline.
func (s *Service) streamBacklog(ctx context.Context) (entries int64, oldest time.Time, err error) {
	keys := newKeyspace(&s.opts)
	vouchers, err := redisctx.Do(ctx, s.rdb, func(ctx context.Context) ([]string, error) {
		return s.rdb.ZRange(ctx, keys.registry(), 0, -1).Result()
	})
	if err != nil || len(vouchers) == 0 {
		return 0, time.Time{}, err
	}
	type stream struct {
		length *redis.IntCmd
		first  *redis.XMessageSliceCmd
	}
	streams, err := redisctx.Do(ctx, s.rdb, func(ctx context.Context) ([]stream, error) {
		out := make([]stream, 0, len(vouchers))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, member := range vouchers {
				id, err := strconv.Atoi(member)
				if err != nil {
					continue
				}
				k := keys.sale(id)
				out = append(out, stream{p.XLen(ctx, k.Orders), p.XRangeN(ctx, k.Orders, "-", "+", 1)})
			}
			return nil
		})
		return out, err
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	for _, st := range streams {
		entries += st.length.Val()
		if msgs := st.first.Val(); len(msgs) > 0 {
			if at := streamIDTime(msgs[0].ID); oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
	}
	return entries, oldest, nil
}

// streamIDTime is the time a stream entry was added: the milliseconds before the id's dash.
func streamIDTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}
