package idgen_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/surgekit/surge/idgen"
)

func TestEpoch(t *testing.T) {
	if got := time.Unix(idgen.Epoch, 0).UTC(); !got.Equal(time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("Epoch is %v", got)
	}
}

// Known values, worked out by hand: (seconds since 2022-01-01) << 32 | seq.
func TestComposeKnownValues(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		seq  uint32
		want int64
	}{
		{time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC), 0, 0},
		{time.Date(2022, 1, 2, 0, 0, 0, 0, time.UTC), 1, 86400<<32 | 1},                // 371085174374401
		{time.Date(2026, 11, 15, 12, 34, 56, 999e6, time.UTC), 42, 660355070050697258}, // 153750896 s; fraction dropped
		{time.Unix(idgen.Epoch+idgen.MaxSeconds, 0), idgen.MaxSequence, 1<<63 - 1},     // the largest id
	} {
		got, err := idgen.Compose(c.t, c.seq)
		if err != nil || got != c.want {
			t.Errorf("Compose(%v, %d) = %d, %v; want %d", c.t, c.seq, got, err, c.want)
		}
		tt, seq := idgen.Decompose(c.want)
		if !tt.Equal(c.t.Truncate(time.Second)) || seq != c.seq {
			t.Errorf("Decompose(%d) = %v, %d; want %v, %d", c.want, tt, seq, c.t.Truncate(time.Second), c.seq)
		}
	}
}

func TestComposeRoundTripAndSignBit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		sec := r.Int64N(idgen.MaxSeconds + 1)
		seq := r.Uint32()
		at := time.Unix(idgen.Epoch+sec, r.Int64N(1e9))
		id, err := idgen.Compose(at, seq)
		if err != nil {
			t.Fatal(err)
		}
		if id < 0 {
			t.Fatalf("Compose(%v, %d) = %d: bit 63 is set", at, seq, id)
		}
		tt, s := idgen.Decompose(id)
		if tt.Unix() != at.Unix() || s != seq || tt.Location() != time.UTC {
			t.Fatalf("round trip of (%v, %d) gave (%v, %d)", at, seq, tt, s)
		}
	}
}

func TestComposeOrder(t *testing.T) {
	// A later second beats any sequence number; within a second the sequence orders.
	a, _ := idgen.Compose(time.Unix(idgen.Epoch+100, 0), idgen.MaxSequence)
	b, _ := idgen.Compose(time.Unix(idgen.Epoch+101, 0), 0)
	c, _ := idgen.Compose(time.Unix(idgen.Epoch+101, 0), 1)
	if !(a < b && b < c) {
		t.Fatalf("want %d < %d < %d", a, b, c)
	}
}

func TestComposeRange(t *testing.T) {
	if _, err := idgen.Compose(time.Unix(idgen.Epoch-1, 0), 1); !errors.Is(err, idgen.ErrClockBeforeEpoch) {
		t.Fatalf("before the epoch: %v", err)
	}
	if _, err := idgen.Compose(time.Unix(idgen.Epoch+idgen.MaxSeconds+1, 0), 1); !errors.Is(err, idgen.ErrTimeOverflow) {
		t.Fatalf("past 2^31 s: %v", err)
	}
}

// IsGenerated tells generated ids from the small ids databases count: ent's global ids give
// each table a range of 2^32, a generated id carries 2^16 seconds or more.
func TestIsGenerated(t *testing.T) {
	now, err := idgen.Compose(time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	early, err := idgen.Compose(time.Unix(idgen.Epoch+1<<16-1, 0), idgen.MaxSequence)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   int64
		want bool
	}{
		{now, true}, {idgen.MinGenerated, true}, {1<<63 - 1, true},
		{early, false}, {idgen.MinGenerated - 1, false}, {4<<32 + 17, false}, {1, false}, {0, false}, {-now, false},
	} {
		if got := idgen.IsGenerated(c.id); got != c.want {
			t.Errorf("IsGenerated(%d) = %v, want %v", c.id, got, c.want)
		}
	}
}
