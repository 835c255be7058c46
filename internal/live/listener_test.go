package live_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/live"
	"github.com/surgekit/surge/internal/testenv"
)

// recorder is a Listener that counts what it hears.
type recorder struct{ attached, ready atomic.Int64 }

func (r *recorder) Attached() { r.attached.Add(1) }
func (r *recorder) Ready()    { r.ready.Add(1) }

// until polls cond until it holds (3 s at most).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestListenerContract: the Hub tells a subscription's Listener of each value put into its
// empty channel and of the close, so that Ready calls minus the receives made equal what the
// channel holds; a value that replaces one not yet read is no Ready (it adds nothing to
// read); Attached says the call succeeded.
func TestListenerContract(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	h := e.hub(live.Options{StockInterval: 5 * time.Millisecond, StockThrottle: -1})
	v := e.voucher(10, false)
	users := e.users(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &recorder{}
	ch, err := h.Stock(live.WithListener(ctx, l), v)
	if err != nil {
		t.Fatal(err)
	}
	var reads int64
	check := func(when string) {
		t.Helper()
		if r := l.ready.Load(); r-reads != int64(len(ch)) {
			t.Fatalf("%s: %d Ready, %d received, %d in the channel", when, r, reads, len(ch))
		}
	}
	if l.attached.Load() != 1 {
		t.Fatalf("Attached %d times after the subscription, want once", l.attached.Load())
	}
	check("subscribed") // the current stock is in the channel, announced
	if len(ch) != 1 {
		t.Fatal("no current value")
	}
	want(t, ch, 10, time.Second)
	reads++
	check("read")

	e.grab(users[0], v)
	until(t, "the new stock in the channel", func() bool { return len(ch) == 1 })
	check("changed")
	drops := h.Stats().Drops
	e.grab(users[1], v) // 8 replaces 9, unread
	until(t, "the value replaced", func() bool { return h.Stats().Drops == drops+1 })
	check("replaced")
	if r := l.ready.Load(); r != 2 {
		t.Fatalf("%d Ready after a replacement, want 2 (one for 10, one for 9; none for 8)", r)
	}
	want(t, ch, 8, time.Second)
	reads++
	check("read the replacement")

	cancel() // the stream ends: its close is one more thing to read
	until(t, "Ready for the close", func() bool { return l.ready.Load() == reads+1 })
	wantClosed(t, ch, time.Second)
	if l.attached.Load() != 1 {
		t.Fatalf("Attached %d times, want once", l.attached.Load())
	}
}

// TestListenerAttachedOnSuccess: a subscription call that fails is not Attached.
func TestListenerAttachedOnSuccess(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	h := e.hub(live.Options{})
	v := e.voucher(5, false)
	user := e.users(1)[0]
	order := e.grab(user, v)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	for _, tc := range []struct {
		name string
		sub  func(ctx context.Context) error
		ok   bool
	}{
		{"stock", func(ctx context.Context) error { _, err := h.Stock(ctx, v); return err }, true},
		{"unknown voucher", func(ctx context.Context) error { _, err := h.Stock(ctx, v+1_000_000); return err }, false},
		{"order", func(ctx context.Context) error { _, err := h.OrderStatus(ctx, user, order); return err }, true},
		{"someone else's order", func(ctx context.Context) error { _, err := h.OrderStatus(ctx, user+1, order); return err }, false},
	} {
		l := &recorder{}
		err := tc.sub(live.WithListener(ctx, l))
		if (err == nil) != tc.ok {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want := map[bool]int64{true: 1, false: 0}[tc.ok]; l.attached.Load() != want {
			t.Errorf("%s: Attached %d times, want %d", tc.name, l.attached.Load(), want)
		}
	}

	h.Close()
	l := &recorder{}
	if _, err := h.Stock(live.WithListener(ctx, l), v); !errors.Is(err, live.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if l.attached.Load() != 0 {
		t.Fatal("Attached after Close")
	}
}

// TestListenerConcurrent: subscribers reading at their own pace while the stock changes as
// fast as grabs go (no throttle, values replaced while unread) each get exactly one Ready per
// receive, the close's included, and the last stock.
func TestListenerConcurrent(t *testing.T) {
	const subscribers, grabs = 8, 40
	e := newEnv(t, testenv.Redis(t))
	h := e.hub(live.Options{StockInterval: time.Millisecond, StockThrottle: -1})
	v := e.voucher(grabs, false)
	users := e.users(grabs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type sub struct {
		l     recorder
		reads int64        // receives, the one that saw the close included (read after wg)
		last  atomic.Int64 // the last value received
	}
	subs := make([]*sub, subscribers)
	var wg sync.WaitGroup
	for i := range subs {
		s := &sub{}
		s.last.Store(-1)
		subs[i] = s
		ch, err := h.Stock(live.WithListener(ctx, &s.l), v)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for {
				n, ok := <-ch
				s.reads++
				if !ok {
					return
				}
				s.last.Store(int64(n))
				if i%2 == 0 {
					time.Sleep(time.Duration(i) * time.Millisecond) // a slow reader: values get replaced
				}
			}
		})
	}
	var grabbers sync.WaitGroup
	for g := range 4 {
		grabbers.Go(func() {
			for i := g; i < grabs; i += 4 {
				if _, err := e.svc.Grab(context.Background(), users[i], v); err != nil {
					t.Error(err)
				}
			}
		})
	}
	grabbers.Wait()
	until(t, "every subscriber at stock 0", func() bool {
		for _, s := range subs {
			if s.last.Load() != 0 {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	for i, s := range subs {
		// The close is announced right after it is made: its Ready may trail the receive.
		until(t, "Ready for the close", func() bool { return s.l.ready.Load() >= s.reads })
		if r := s.l.ready.Load(); r != s.reads {
			t.Errorf("subscriber %d: %d Ready for %d receives (the close's included)", i, r, s.reads)
		}
	}
	if h.Stats().Drops == 0 {
		t.Log("no value was replaced: the replacement path went untested this time")
	}
	t.Logf("stats %+v", h.Stats())
}
