package seckill_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestCancelledWarmDoesNotFailSharedWarms: concurrent warms of one voucher share one run; the
// first caller giving up must not fail the others. The run waits for the voucher's lock, held
// by a stock change on another server, while the first caller's ctx is cancelled.
func TestCancelledWarmDoesNotFailSharedWarms(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	ctx := context.Background()
	admin := e.service(seckill.Options{})
	s := e.service(seckill.Options{})
	v := e.onSale(admin, 5)

	holding, release := make(chan struct{}), make(chan struct{})
	guarded := make(chan error, 1)
	go func() {
		guarded <- admin.Guard(ctx, v, func(context.Context) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding

	first, cancelFirst := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() { firstDone <- s.Warm(first, v) }()
	time.Sleep(100 * time.Millisecond) // the first caller's run now waits for the lock
	secondDone := make(chan error, 1)
	go func() { secondDone <- s.Warm(ctx, v) }()
	time.Sleep(100 * time.Millisecond) // the second caller joined that run
	cancelFirst()
	select {
	case err := <-firstDone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled caller: %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the cancelled caller still waits 2 s after its ctx ended")
	}
	close(release)
	if err := <-guarded; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-secondDone:
		if err != nil {
			t.Fatalf("second caller, whose ctx never ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second caller's warm did not finish")
	}
}
