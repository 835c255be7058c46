package idgen

import (
	"context"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

func (g *Generator) stepNow() int64 {
	g.seg.mu.Lock()
	defer g.seg.mu.Unlock()
	return g.seg.step
}

func (g *Generator) lastLoadNow() time.Time {
	g.seg.mu.Lock()
	defer g.seg.mu.Unlock()
	return g.seg.lastLoad
}

// The step doubles while blocks go faster than the block duration, up to the maximum, and
// halves (down to the minimum) when they last two block durations or more.
func TestSegmentStepAdapts(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	prefix := "test-step-" + time.Now().Format("150405.000000000")
	defer func() {
		for _, d := range []time.Time{time.Now(), time.Now().Add(-time.Hour)} {
			rdb.Del(ctx, "id:"+prefix+":"+d.UTC().Format("20060102"))
		}
	}()
	const target = 100 * time.Millisecond
	g, err := NewSegment(rdb, prefix, WithStep(10, 640), WithBlockDuration(target))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	take := func(n int) {
		for range n {
			if _, err := g.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	take(5000) // 5000 ids in a few ms: 10, 20, 40, ... 640
	if s := g.stepNow(); s != 640 {
		t.Fatalf("after a fast burst the step is %d, want the maximum 640", s)
	}
	// Now one fetch per 2.5 block durations: the step halves at each fetch, down to 10.
	for i := 0; i < 20 && g.stepNow() > 10; i++ {
		time.Sleep(target * 5 / 2)
		for before := g.lastLoadNow(); g.lastLoadNow() == before; {
			take(1)
		}
	}
	if s := g.stepNow(); s != 10 {
		t.Fatalf("after slow blocks the step is %d, want the minimum 10", s)
	}
}
