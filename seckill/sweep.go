package seckill

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sweeper finds the work no signal announces in this process: orders admitted by another
// process (which may have died), entries pending with dead consumers (to claim) or here unseen
// (a read whose reply was lost), consumers long gone. It goes round the live vouchers with one
// XINFO GROUPS each — the group's lag (entries not yet delivered) and pending count in one
// command — pipelined, sweepRate commands per second at most, and signals those with work. So
// the whole set is covered every max(sweepMinCycle, live/sweepRate), and an idle voucher
// costs one command per cycle.
type sweeper struct {
	c *consumer

	mu     sync.Mutex
	live   []int
	listed bool // setLive was called
	cursor int
	carry  float64
	forgot map[int]time.Time // when the sweep last asked for a voucher's consumers to be forgotten
	// all asks for a sweep of every live voucher at once (sweepAll).
	all chan struct{}
}

// sweepTick is how often the sweeper sends a slice; sweepMinCycle the shortest time it takes
// to go round (few vouchers).
const (
	sweepTick     = 250 * time.Millisecond
	sweepMinCycle = time.Second
)

// maxForgetEvery bounds how often, per voucher, a group is checked for the consumers of
// processes long gone (forgetConsumers): every forgetConsumersIdle ClaimIdle periods (the
// idle time that condemns a consumer), at most every maxForgetEvery. A voucher first seen is
// given a random phase, so that the checks of many vouchers spread over the period.
const maxForgetEvery = 10 * time.Minute

func (s *sweeper) forgetEvery() time.Duration {
	return min(maxForgetEvery, forgetConsumersIdle*s.c.opts.claimIdle)
}

func newSweeper(c *consumer) *sweeper {
	return &sweeper{c: c, forgot: map[int]time.Time{}, all: make(chan struct{}, 1)}
}

// setLive gives the sweeper the live vouchers. The first list is swept at once, whole: a
// consumer that starts on a backlog reads it without waiting for a sweep round.
func (s *sweeper) setLive(live []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.listed {
		s.listed = true
		s.sweepAll()
	}
	s.live = live
	keep := make(map[int]time.Time, len(live))
	now, every := time.Now(), s.forgetEvery()
	for _, v := range live {
		if t, ok := s.forgot[v]; ok {
			keep[v] = t
		} else {
			keep[v] = now.Add(-rand.N(every))
		}
	}
	s.forgot = keep
}

// sweepAll asks for a sweep of every live voucher at once: at the start, and when the
// consumer (re)subscribes to the announcements (those published meanwhile are lost).
func (s *sweeper) sweepAll() {
	select {
	case s.all <- struct{}{}:
	default:
	}
}

// testHookSweepAll, set by tests only, runs at each sweep of every live voucher.
var testHookSweepAll func()

// sweepAllChunk bounds the commands of one pipeline of a sweep of every live voucher.
const sweepAllChunk = 1000

// run sweeps a slice every sweepTick, and every live voucher when asked, until ctx ends.
func (s *sweeper) run(ctx context.Context) {
	tick := time.NewTicker(sweepTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if slice := s.next(); len(slice) > 0 {
				s.sweep(ctx, slice)
			}
		case <-s.all:
			if testHookSweepAll != nil {
				testHookSweepAll()
			}
			s.mu.Lock()
			live := s.live
			s.mu.Unlock()
			for chunk := range slices.Chunk(live, sweepAllChunk) {
				s.sweep(ctx, chunk)
			}
		}
	}
}

// next is the slice of vouchers to sweep now.
func (s *sweeper) next() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.live)
	if n == 0 {
		return nil
	}
	cycle := max(sweepMinCycle, time.Duration(float64(n)/float64(s.c.opts.sweepRate)*float64(time.Second)))
	s.carry += float64(n) * float64(sweepTick) / float64(cycle)
	k := min(n, int(math.Floor(s.carry)))
	s.carry -= float64(k)
	out := make([]int, 0, k)
	for range k {
		s.cursor %= n
		out = append(out, s.live[s.cursor])
		s.cursor++
	}
	return out
}

// sweep reads the groups of a slice's streams and signals the vouchers with work.
func (s *sweeper) sweep(ctx context.Context, slice []int) {
	rdb := s.c.rdb
	cmds, _ := bounded(ctx, rdb, func(ctx context.Context) ([]*redis.XInfoGroupsCmd, error) {
		cmds := make([]*redis.XInfoGroupsCmd, len(slice))
		// Each command's error is read below (a stream that does not exist has no work).
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, v := range slice {
				cmds[i] = p.XInfoGroups(ctx, s.c.keys.sale(v).Orders)
			}
			return nil
		})
		return cmds, err
	})
	if cmds == nil {
		return
	}
	now := time.Now()
	for i, v := range slice {
		groups, err := cmds[i].Result()
		if err != nil {
			continue
		}
		for _, g := range groups {
			if g.Name != s.c.opts.group {
				continue
			}
			var wants uint8
			if g.Pending > 0 {
				wants |= wantClaim | wantOwn
			}
			if g.Consumers > 0 && s.forgetDue(v, now) {
				wants |= wantForget
			}
			// Lag -1: Redis cannot tell (entries deleted out of order); a read will.
			if g.Lag != 0 || wants != 0 {
				s.c.ready.signal(v, wants)
			}
		}
	}
}

// forgetDue reports whether forgetEvery has passed since the voucher's consumers were last
// looked at, and notes now if so.
func (s *sweeper) forgetDue(v int, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.forgot[v]; ok && now.Sub(last) < s.forgetEvery() {
		return false
	}
	s.forgot[v] = now
	return true
}
