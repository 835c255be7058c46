package seckill

import (
	"sync"
	"time"
)

// RateLimit bounds the grabs of one user per process: Burst at once, then PerSecond. It is
// kept in process memory on purpose: a refused bot costs no Redis round trip at all, which
// is the point of the limit. Behind a load balancer spreading a user over n servers, a user
// gets at most n times the rate.
type RateLimit struct {
	PerSecond float64 // sustained rate (5); < 0 disables the limit
	Burst     int     // attempts allowed at once (10)
}

// limiter is a GCRA (generic cell rate algorithm) per user: one "theoretical arrival time"
// per user, sharded to keep lock contention low.
type limiter struct {
	interval time.Duration // 1 / rate
	slack    time.Duration // (burst - 1) * interval
	shards   [64]limiterShard
}

type limiterShard struct {
	mu  sync.Mutex
	tat map[int]time.Time
}

func newLimiter(r RateLimit) *limiter {
	if r.PerSecond < 0 {
		return nil
	}
	if r.PerSecond == 0 {
		r.PerSecond = 5
	}
	if r.Burst <= 0 {
		r.Burst = 10
	}
	l := &limiter{interval: time.Duration(float64(time.Second) / r.PerSecond)}
	l.slack = time.Duration(r.Burst-1) * l.interval
	for i := range l.shards {
		l.shards[i].tat = map[int]time.Time{}
	}
	return l
}

// allow reports whether the user may make one more attempt at now.
func (l *limiter) allow(user int, now time.Time) bool {
	if l == nil {
		return true
	}
	s := &l.shards[uint(user)%uint(len(l.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	tat, ok := s.tat[user]
	if !ok || tat.Before(now) {
		tat = now
	}
	if tat.Sub(now) > l.slack {
		return false
	}
	s.tat[user] = tat.Add(l.interval)
	if len(s.tat) > 4096 {
		// Users whose arrival time has passed are back to a full burst: forget them.
		for u, t := range s.tat {
			if t.Before(now) {
				delete(s.tat, u)
			}
		}
	}
	return true
}
