package seckill_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestRunConsumerReportsWhyItStopped: RunConsumer returned nil whatever happened. It now
// returns ctx's cause when stopped, and refuses at once to run twice on one Service (two
// readers under one consumer name).
func TestRunConsumerReportsWhyItStopped(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	s := e.service(seckill.Options{})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- s.RunConsumer(ctx) }()
	}
	select { // one of the two refuses at once
	case err := <-done:
		if !errors.Is(err, seckill.ErrConsumerRunning) {
			t.Fatalf("one of two RunConsumer calls answered %v, want ErrConsumerRunning", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("two RunConsumer calls ran at once on one Service")
	}
	stop := errors.New("shutting down")
	cancel(stop)
	select {
	case err := <-done:
		if !errors.Is(err, stop) {
			t.Fatalf("RunConsumer returned %v, want ctx's cause", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunConsumer did not return after ctx ended")
	}
}
