package seckill_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// logRecorder keeps every log record, to tell what a service did and when.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

// after returns the records logged after t.
func (r *logRecorder) after(t time.Time) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.records {
		if rec.Time.After(t) {
			out = append(out, rec)
		}
	}
	return out
}

// TestCloseWaitsForEveryBackgroundWarm: a grab on a voucher Redis does not hold starts a
// rebuild in the background. Close running between that grab's "is the service closed?"
// check and the start of the rebuild must still wait for it (or keep it from starting):
// nothing may run on the service's closed clients after Close returned.
func TestCloseWaitsForEveryBackgroundWarm(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	ctx := context.Background()
	logs := &logRecorder{}
	s, err := seckill.New(e.db.Ent, testenv.Another(t, e.rdb), e.options(seckill.Options{Logger: slog.New(logs)}))
	if err != nil {
		t.Fatal(err)
	}
	v := e.voucher(5) // not warmed: the first grab answers NOT_READY and rebuilds
	user := e.users(1)[0]

	closed := make(chan time.Time, 1)
	restore := seckill.SetBackgroundStartHook(func() {
		go func() { _ = s.Close(); closed <- time.Now() }()
		time.Sleep(200 * time.Millisecond) // Close runs (or waits) now
	})
	defer restore()
	if _, err := s.Grab(ctx, user, v); !errors.Is(err, seckill.ErrNotReady) {
		t.Fatalf("grab on a cold voucher: %v, want ErrNotReady", err)
	}
	var closedAt time.Time
	select {
	case closedAt = <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	time.Sleep(500 * time.Millisecond) // a rebuild started after Close would have run by now
	for _, rec := range logs.after(closedAt) {
		t.Errorf("logged after Close returned: %s %v", rec.Message, attrs(rec))
	}
}

func attrs(rec slog.Record) map[string]any {
	m := map[string]any{}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	return m
}
