package telemetry

import (
	"io"
	"sync"
	"time"
)

// BatchWriter gathers the lines written to it and writes them to w in batches: at most every
// interval after the first line waiting, at once when limit bytes wait, and on Flush and
// Close. A server's access log writes a line per request; written one by one, each is a
// system call on the request's path (and a request stalls when the log's reader is slow).
// Batched, a few calls a second carry them all.
//
// Nothing is dropped: a writer that finds limit bytes waiting writes them itself, so a slow w
// slows the writers down as it did without the batching (back pressure), and memory stays
// bounded. Lines keep their order; each Write is kept whole (slog writes a record at once).
// A write error of w is returned by the next Write.
type BatchWriter struct {
	w        io.Writer
	interval time.Duration
	limit    int

	out      sync.Mutex // held while a batch is written to w: one at a time, in order
	mu       sync.Mutex // guards the fields below
	buf      []byte     // lines waiting
	spare    []byte     // the last batch's buffer, reused
	err      error
	closed   bool
	kick     chan struct{} // the flusher has lines to wait for
	stop     chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}
}

// NewBatchWriter starts the goroutine that flushes every interval; Close stops it.
func NewBatchWriter(w io.Writer, interval time.Duration, limit int) *BatchWriter {
	b := &BatchWriter{w: w, interval: interval, limit: limit, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go b.flusher()
	return b
}

func (b *BatchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.out.Lock()
		defer b.out.Unlock()
		return b.w.Write(p)
	}
	err := b.err
	b.err = nil
	first := len(b.buf) == 0
	b.buf = append(b.buf, p...)
	full := len(b.buf) >= b.limit
	b.mu.Unlock()
	if full {
		if ferr := b.Flush(); ferr != nil && err == nil {
			err = ferr
		}
	} else if first {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	return len(p), err
}

// Flush writes the lines waiting, and returns w's error.
func (b *BatchWriter) Flush() error {
	b.out.Lock()
	defer b.out.Unlock()
	b.mu.Lock()
	batch := b.buf
	b.buf, b.spare = b.spare[:0], nil
	b.mu.Unlock()
	if len(batch) == 0 {
		b.mu.Lock()
		b.spare = batch
		b.mu.Unlock()
		return nil
	}
	_, err := b.w.Write(batch)
	b.mu.Lock()
	if cap(batch) <= 4*b.limit { // a burst's oversized buffer is let go
		b.spare = batch[:0]
	}
	if err != nil {
		b.err = err
	}
	b.mu.Unlock()
	return err
}

// Close writes what waits and stops the flusher; later writes go straight to w, after it.
func (b *BatchWriter) Close() error {
	b.stopOnce.Do(func() { close(b.stop) })
	<-b.stopped
	b.out.Lock()
	defer b.out.Unlock()
	b.mu.Lock()
	b.closed = true
	batch := b.buf
	b.buf = nil
	b.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	_, err := b.w.Write(batch)
	return err
}

func (b *BatchWriter) flusher() {
	defer close(b.stopped)
	t := time.NewTimer(b.interval)
	t.Stop()
	for {
		select {
		case <-b.kick:
		case <-b.stop:
			return
		}
		t.Reset(b.interval)
		select {
		case <-t.C:
		case <-b.stop:
			t.Stop()
			return
		}
		_ = b.Flush()
	}
}

// flusher is a writer that can be asked to write what it holds.
type flusher interface{ Flush() error }
