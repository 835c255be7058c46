package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
)

func TestOptionsAndPrefix(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, p := range []string{"", "a b", "a\tb", "a{b", "b}", "x\n", "a\x00"} {
		if _, err := idgen.New(rdb, p); !errors.Is(err, idgen.ErrInvalidPrefix) {
			t.Errorf("prefix %q: %v, want ErrInvalidPrefix", p, err)
		}
	}
	for _, p := range []string{"order", "seckill:order", "a-b_c.d", "订单"} {
		if _, err := idgen.New(rdb, p); err != nil {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
	for name, o := range map[string]idgen.Option{
		"nil clock":       idgen.WithClock(nil),
		"epoch < 1970":    idgen.WithEpoch(time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)),
		"short retention": idgen.WithRetention(time.Millisecond),
		"step min 0":      idgen.WithStep(0, 10),
		"step min > max":  idgen.WithStep(10, 5),
		"step max > 2^32": idgen.WithStep(1, 1<<32),
		"zero block dur.": idgen.WithBlockDuration(0),
	} {
		if _, err := idgen.NewSegment(rdb, "order", o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := idgen.New(nil, "order"); err == nil {
		t.Error("nil client accepted")
	}
}

// Plain mode on the real clock: sequence 1, 2, 3 on a fresh key, seconds of now, the key
// named after today's UTC date with an expiry between 24 h and 48 h away.
func TestPlainBasics(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		p := newPrefix(t, rdb)
		g, err := idgen.New(rdb, p)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		before := time.Now().Truncate(time.Second)
		var prev int64
		for i := 1; i <= 3; i++ {
			id, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			at, seq := idgen.Decompose(id)
			// A new day key is fenced as after a loss: its first ids may carry a second up to
			// the fence (block lifetime + clock skew + 1 s, 13 s by default) ahead.
			if id <= prev || seq != uint32(i) || at.Before(before) || at.After(time.Now().Add(14*time.Second)) {
				t.Fatalf("id %d = (%v, %d) after %d", id, at, seq, prev)
			}
			prev = id
		}
		_, seq := idgen.Decompose(prev)
		key := dayKey(p, time.Now())
		if v, _ := counter(ctx, rdb, key); v != int64(seq) {
			// Only possible if the test ran across midnight: then the last id's day holds it.
			at, _ := idgen.Decompose(prev)
			key = dayKey(p, at)
		}
		if v, err := counter(ctx, rdb, key); err != nil || v != 3 && v != int64(seq) {
			t.Fatalf("%s = %d, %v", key, v, err)
		}
		ttl, _ := rdb.TTL(ctx, key).Result()
		if ttl <= 24*time.Hour || ttl > 48*time.Hour {
			t.Fatalf("TTL of %s is %v, want (24h, 48h]", key, ttl)
		}
	})
}

// Ids on both sides of midnight, in both modes: unique, increasing, each one's seconds inside
// the UTC day whose key its sequence number came from, and the two days on separate keys.
// The injected clock picks the day key and the seconds alike.
func TestRolloverAcrossMidnight(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
				ctx := context.Background()
				p := newPrefix(t, rdb)
				mid := nextMidnight()
				clk := newClock(mid.Add(-2*time.Second), 0)
				g, err := m.new(rdb, p, idgen.WithClock(clk.Now), idgen.WithStep(100, 100))
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()

				seen := map[int64]bool{}
				var prev int64
				take := func(n int) (maxSeq uint32) {
					t.Helper()
					for range n {
						id, err := g.Next(ctx)
						if err != nil {
							t.Fatal(err)
						}
						if seen[id] || id <= prev {
							t.Fatalf("id %d repeated or not above %d", id, prev)
						}
						seen[id], prev = true, id
						at, seq := idgen.Decompose(id)
						if !at.Equal(clk.Now().Truncate(time.Second)) {
							t.Fatalf("id %d carries %v, clock says %v", id, at, clk.Now())
						}
						maxSeq = max(maxSeq, seq)
					}
					return maxSeq
				}
				before := take(250) // 23:59:58: three blocks of 100 in segment mode
				clk.Set(mid.Add(-time.Nanosecond))
				before = max(before, take(10)) // 23:59:59.999999999, still day D
				clk.Set(mid)
				after := take(250) // 00:00:00 of day D+1: a new key, counting from 1

				keyD, keyD1 := dayKey(p, mid.Add(-time.Second)), dayKey(p, mid)
				vD, errD := counter(ctx, rdb, keyD)
				vD1, errD1 := counter(ctx, rdb, keyD1)
				if errD != nil || errD1 != nil || vD < int64(before) || vD1 < int64(after) {
					t.Fatalf("%s = %d (%v), %s = %d (%v); highest seq before %d, after %d", keyD, vD, errD, keyD1, vD1, errD1, before, after)
				}
				if m.name == "plain" && (vD != 260 || vD1 != 250) {
					t.Fatalf("plain mode: %s = %d, %s = %d; want 260 and 250", keyD, vD, keyD1, vD1)
				}
				if after > 300 {
					t.Fatalf("day D+1 sequence reached %d: it did not start afresh", after)
				}
				for _, k := range []string{keyD, keyD1} {
					ttl, _ := rdb.TTL(ctx, k).Result()
					if ttl <= 0 {
						t.Fatalf("%s has no expiry (%v)", k, ttl)
					}
				}
			})
		})
	}
}

// A clock that steps back never makes ids go down: they keep the latest second (and its day)
// until the clock catches up.
func TestClockStepsBack(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			rdb := testenv.Redis(t)
			ctx := context.Background()
			p := newPrefix(t, rdb)
			mid := nextMidnight()
			clk := newClock(mid.Add(time.Second), 0)
			g, err := m.new(rdb, p, idgen.WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			a, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			clk.Set(mid.Add(-10 * time.Second)) // back across midnight, into day D
			b, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			at, _ := idgen.Decompose(b)
			if b <= a || !at.Equal(mid.Add(time.Second)) {
				t.Fatalf("after the clock stepped back: %d then %d (at %v)", a, b, at)
			}
			if n, _ := rdb.Exists(ctx, dayKey(p, mid.Add(-10*time.Second))).Result(); n != 0 {
				t.Fatal("the clock's step back made the generator use the previous day's key")
			}
		})
	}
}

// Near 2^32 the day's sequence ends with ErrSequenceExhausted, in both modes: every number up
// to MaxSequence is handed out once, nothing wraps, and the next UTC day works again.
func TestSequenceExhausted(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
				ctx := context.Background()
				p := newPrefix(t, rdb)
				mid := nextMidnight()
				clk := newClock(mid.Add(-time.Hour), 0)
				key := dayKey(p, clk.Now())
				const left = 1500
				if err := setCounter(ctx, rdb, key, idgen.MaxSequence-left); err != nil {
					t.Fatal(err)
				}
				g, err := m.new(rdb, p, idgen.WithClock(clk.Now), idgen.WithStep(1000, 1000))
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()

				seqs := map[uint32]bool{}
				var prev int64
				for {
					id, err := g.Next(ctx)
					if errors.Is(err, idgen.ErrSequenceExhausted) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					_, seq := idgen.Decompose(id)
					if id <= prev || seqs[seq] || seq <= idgen.MaxSequence-left {
						t.Fatalf("id %d (seq %d) after %d: repeated, wrapped or below the preset counter", id, seq, prev)
					}
					seqs[seq], prev = true, id
				}
				if len(seqs) != left || !seqs[idgen.MaxSequence] {
					t.Fatalf("%d ids before exhaustion (want %d, ending at MaxSequence: %v)", len(seqs), left, seqs[idgen.MaxSequence])
				}
				for range 3 { // stays exhausted: no wrap around to small numbers
					if _, err := g.Next(ctx); !errors.Is(err, idgen.ErrSequenceExhausted) {
						t.Fatalf("after exhaustion: %v", err)
					}
				}
				// A fresh generator (another process) hears the same from Redis.
				g2, _ := m.new(rdb, p, idgen.WithClock(clk.Now))
				defer g2.Close()
				if _, err := g2.Next(ctx); !errors.Is(err, idgen.ErrSequenceExhausted) {
					t.Fatalf("fresh generator: %v", err)
				}
				if v, _ := counter(ctx, rdb, key); v <= idgen.MaxSequence {
					t.Fatalf("counter %d: the script must count on, never reset", v)
				}
				clk.Set(mid) // the next day has its own sequence
				id, err := g.Next(ctx)
				if _, seq := idgen.Decompose(id); err != nil || seq != 1 {
					t.Fatalf("next day: seq %d, %v", seq, err)
				}
			})
		})
	}
}

// A clock so far behind Redis that its day's key may have expired gets ErrDayExpired and
// creates no key, rather than restarting that day's sequence at 1.
func TestDayExpired(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
				ctx := context.Background()
				p := newPrefix(t, rdb)
				past := time.Now().Add(-72 * time.Hour)
				g, err := m.new(rdb, p, idgen.WithClock(func() time.Time { return past }))
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				if _, err := g.Next(ctx); !errors.Is(err, idgen.ErrDayExpired) {
					t.Fatalf("3 days behind: %v", err)
				}
				if n, _ := rdb.Exists(ctx, dayKey(p, past)).Result(); n != 0 {
					t.Fatal("an expired day's key was created")
				}
				// Yesterday is still fine with the default retention (24 h after the day's end),
				// and refused with a retention of a second.
				yesterday := time.Now().Add(-24 * time.Hour)
				g2, _ := m.new(rdb, p, idgen.WithClock(func() time.Time { return yesterday }))
				defer g2.Close()
				if _, err := g2.Next(ctx); err != nil {
					t.Fatalf("yesterday, default retention: %v", err)
				}
				g3, _ := m.new(rdb, p+"-short", idgen.WithClock(func() time.Time { return yesterday }), idgen.WithRetention(time.Second))
				defer g3.Close()
				if _, err := g3.Next(ctx); !errors.Is(err, idgen.ErrDayExpired) {
					t.Fatalf("yesterday, 1 s retention: %v", err)
				}
			})
		})
	}
}

func TestClockOutOfRange(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, m := range modes {
		for _, c := range []struct {
			at   time.Time
			want error
		}{
			{time.Unix(idgen.Epoch-1, 0), idgen.ErrClockBeforeEpoch},
			{time.Unix(idgen.Epoch+idgen.MaxSeconds+1, 0), idgen.ErrTimeOverflow},
		} {
			g, _ := m.new(rdb, "never-used", idgen.WithClock(func() time.Time { return c.at }))
			if _, err := g.Next(context.Background()); !errors.Is(err, c.want) {
				t.Errorf("%s at %v: %v, want %v", m.name, c.at, err, c.want)
			}
			g.Close()
		}
	}
}

// WithEpoch moves the zero of the seconds field; Decompose on the generator undoes it.
func TestCustomEpoch(t *testing.T) {
	rdb := testenv.Redis(t)
	p := newPrefix(t, rdb)
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Now().Add(time.Hour).Truncate(time.Second) // past the new key's fence
	g, err := idgen.New(rdb, p, idgen.WithEpoch(epoch), idgen.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	at, seq := g.Decompose(id)
	if !at.Equal(now) || seq != 1 || id>>32 != now.Unix()-epoch.Unix() {
		t.Fatalf("id %d = (%v, %d)", id, at, seq)
	}
}

func TestNextAfterClose(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, m := range modes {
		p := newPrefix(t, rdb)
		g, _ := m.new(rdb, p)
		if _, err := g.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrClosed) {
			t.Fatalf("%s: Next after Close: %v", m.name, err)
		}
		if err := g.Close(); err != nil {
			t.Fatalf("%s: second Close: %v", m.name, err)
		}
	}
}

// The key layout is what the package documentation promises: id:<prefix>:<yyyymmdd>, UTC.
func TestKeyName(t *testing.T) {
	rdb := testenv.Redis(t)
	p := newPrefix(t, rdb)
	at := time.Date(2030, 2, 3, 23, 30, 0, 0, time.FixedZone("UTC-5", -5*3600)) // 2030-02-04 in UTC
	g, _ := idgen.New(rdb, p, idgen.WithClock(func() time.Time { return at }))
	if _, err := g.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("id:%s:20300204", p)
	if v, err := counter(context.Background(), rdb, key); err != nil || v != 1 {
		t.Fatalf("%s = %d, %v", key, v, err)
	}
}
