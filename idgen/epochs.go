package idgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// EpochStore keeps the fences of a prefix's counters outside Redis (a database), so that a
// fence survives what Redis loses. Without one, a fence lives only in its day key: a loss in
// the same second as a fence (the first ids of a day or of an empty Redis, or an earlier loss)
// fences again to the same second, and the numbers handed out under it are handed out again.
// With one, every fence is recorded before any id is stamped with it, and each fence applied
// is strictly above every fence applied before it.
//
// The store is touched only when a reservation finds a possible loss (no key: a loss, a new
// day or a new prefix; another Redis process; a counter below a known number): never on the
// path of an ordinary id. SQLEpochs implements it on MySQL/MariaDB and SQLite.
type EpochStore interface {
	// Advance returns a fence for name (a Unix second) of at least atLeast and above every
	// fence Apply has claimed for name, recorded durably before it returns. Callers asking at
	// the same time may be given the same fence, as long as none has claimed it.
	Advance(ctx context.Context, name string, atLeast int64) (int64, error)
	// Apply claims fence durably (once: any later Apply of it returns ErrFenceTaken) and then,
	// if fence is still the latest fence of name, calls apply while no other fence of name can
	// be recorded, and returns what apply returns. It returns ErrFenceTaken without calling
	// apply if fence was claimed before or a later fence was recorded.
	//
	// If apply fails, the hold outlasts Apply's return until holdUntil: apply's work may still
	// take effect until then (a Redis call given up on, run late by a hung Redis), and no later
	// fence may be recorded before it no longer can. Apply itself returns at ctx's end.
	Apply(ctx context.Context, name string, fence int64, holdUntil time.Time, apply func(context.Context) error) error
	// Latest returns the latest fence recorded for name (0 if none): every id of name stamped
	// before it was recorded carries an earlier second.
	Latest(ctx context.Context, name string) (int64, error)
}

// ErrFenceTaken is returned by EpochStore.Apply when the fence was claimed already or a later
// one was recorded: the counter is being fenced by another caller; ask again.
var ErrFenceTaken = errors.New("idgen: the fence was claimed or superseded")

// WithEpochStore records every fence of the generator's counters in s before it is used (see
// EpochStore). Every generator of a prefix must use the same store, or none.
func WithEpochStore(s EpochStore) Option {
	return func(c *config) {
		if s == nil {
			c.fail(errors.New("idgen: WithEpochStore(nil)"))
		}
		c.epochs = s
	}
}

// epochName is the name of the generator's fences in its epoch store: one per prefix and
// namespace (fences are seconds, so one sequence of them serves every day).
func (g *Generator) epochName() string { return g.cfg.namespace + "id:" + g.prefix }

// LatestFence returns the latest fence recorded in the generator's epoch store (the zero time
// if none, or without a store). An id whose second is before it was issued before that fence
// was recorded: a Redis loss after an id was issued is followed by such a fence at the first
// reservation after it.
func (g *Generator) LatestFence(ctx context.Context) (time.Time, error) {
	if g.cfg.epochs == nil {
		return time.Time{}, nil
	}
	f, err := g.cfg.epochs.Latest(ctx, g.epochName())
	if err != nil || f == 0 {
		return time.Time{}, err
	}
	return time.Unix(f, 0).UTC(), nil
}

// applyWindow is how long after Redis's clock read by the ask a fence's apply call may still
// change Redis (lua.FenceApply's deadline, judged by Redis's clock); holdMargin covers the
// round trip that read it. When the call fails, the epoch store holds the fence until the
// deadline has passed.
const (
	applyWindow = time.Second
	holdMargin  = 250 * time.Millisecond
)

// errFenceRetry tells reserve to ask Redis again: another caller is fencing the counter.
var errFenceRetry = errors.New("idgen: fence taken, ask again")

// fenceDurably records a fence of at least ask.LeastFence in the epoch store and applies it to
// d's key while holding it, reserving n numbers above floor. ask is the reply that found the
// possible loss, read at asked (local monotonic clock). It returns errFenceRetry when another
// caller's fence got in first.
func (g *Generator) fenceDurably(ctx context.Context, d *day, n, floor int64, ask lua.IDReservation, asked time.Time) (lua.IDReservation, error) {
	name := g.epochName()
	for {
		// A second of margin: the apply below must still find the fence ahead of Redis's
		// clock by the full fence, and a second may turn meanwhile.
		f, err := g.cfg.epochs.Advance(ctx, name, ask.LeastFence+1)
		if err != nil {
			return lua.IDReservation{}, fmt.Errorf("idgen: recording a fence for %s: %w", d.key, err)
		}
		// The deadline by Redis's clock: its reading at the ask, plus the time since, plus the
		// window; the store holds the fence as long by the local clock.
		notAfter := ask.RedisNow + time.Since(asked).Milliseconds() + applyWindow.Milliseconds()
		holdUntil := time.Now().Add(applyWindow + holdMargin)
		var r lua.IDReservation
		err = g.cfg.epochs.Apply(ctx, name, f, holdUntil, func(ctx context.Context) error {
			var err error
			r, err = redisctx.Do(ctx, g.rdb, func(ctx context.Context) (lua.IDReservation, error) {
				return lua.ReserveIDs(ctx, g.rdb, d.key, n, d.expireAt, floor, g.cfg.fence(), lua.FenceApply(f, notAfter))
			})
			return err
		})
		switch {
		case errors.Is(err, ErrFenceTaken):
			return lua.IDReservation{}, errFenceRetry
		case err != nil:
			return lua.IDReservation{}, fmt.Errorf("idgen: applying fence %d to %s: %w", f, d.key, err)
		case r.TooLate:
			// Redis's clock moved on while the fence was recorded: record a later one.
			ask, asked = r, time.Now()
			continue
		}
		return r, nil
	}
}

// pauseBeforeAsking waits a few milliseconds (or until ctx ends) before asking Redis again
// after another caller's fence got in first, so that it can apply it.
func pauseBeforeAsking(ctx context.Context) error {
	t := time.NewTimer(time.Duration(1+rand.IntN(10)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
