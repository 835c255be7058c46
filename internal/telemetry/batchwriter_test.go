package telemetry_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/telemetry"
)

// lockedBuffer is a bytes.Buffer that counts the writes made to it.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) snapshot() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

// Lines from many goroutines arrive whole, each once, in fewer writes than lines; every
// writer's own lines keep their order; they arrive within the interval with no Flush.
func TestBatchWriterKeepsEveryLine(t *testing.T) {
	var dst lockedBuffer
	bw := telemetry.NewBatchWriter(&dst, 20*time.Millisecond, 4<<10)
	const writers, lines = 16, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				if _, err := fmt.Fprintf(bw, "w%02d line %04d %s\n", g, i, strings.Repeat("x", i%50)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := dst.snapshot()
		if strings.Count(got, "\n") == writers*lines || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, writes := dst.snapshot()
	next := make([]int, writers)
	sc := bufio.NewScanner(strings.NewReader(got))
	n := 0
	for sc.Scan() {
		var g, i int
		var pad string
		if _, err := fmt.Sscanf(sc.Text(), "w%02d line %04d %s", &g, &i, &pad); err != nil && i%50 != 0 {
			t.Fatalf("line %d mangled: %q (%v)", n, sc.Text(), err)
		}
		if i != next[g] || len(pad) != i%50 {
			t.Fatalf("writer %d: line %d (pad %d) after line %d", g, i, len(pad), next[g]-1)
		}
		next[g]++
		n++
	}
	if n != writers*lines {
		t.Fatalf("%d lines arrived without Flush or Close, want %d", n, writers*lines)
	}
	if writes >= n/10 {
		t.Errorf("%d writes for %d lines: not batched", writes, n)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	// After Close, straight through.
	fmt.Fprintln(bw, "after close")
	if got, _ := dst.snapshot(); !strings.HasSuffix(got, "after close\n") {
		t.Errorf("a line written after Close did not arrive: %q", got[max(0, len(got)-40):])
	}
}

// A warning goes out at once, with the lines before it, however long the interval; Close
// writes the rest.
func TestBatchWriterWritesWarningsAtOnce(t *testing.T) {
	var dst lockedBuffer
	bw := telemetry.NewBatchWriter(&dst, time.Hour, 1<<20)
	log, err := telemetry.NewLogger(bw, telemetry.LogText, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("request", "n", 1)
	log.Info("request", "n", 2)
	if got, _ := dst.snapshot(); got != "" {
		t.Fatalf("INFO lines written before the interval: %q", got)
	}
	log.Warn("redis slow")
	got, _ := dst.snapshot()
	if strings.Count(got, "\n") != 3 || !strings.Contains(got, "n=1") || !strings.Contains(got, "n=2") ||
		strings.Index(got, "n=2") > strings.Index(got, "redis slow") {
		t.Fatalf("after a WARN: %q, want both INFO lines then the warning", got)
	}
	log.With("component", "x").Info("late")
	if got, _ := dst.snapshot(); strings.Contains(got, "late") {
		t.Fatalf("INFO written at once: %q", got)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := dst.snapshot(); !strings.Contains(got, "msg=late component=x") {
		t.Fatalf("Close did not write the last line: %q", got)
	}
}

// A reader that stops reading holds the writers back once limit bytes wait (nothing is
// dropped, memory stays bounded); when it reads again every line arrives.
func TestBatchWriterBackPressure(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bw := telemetry.NewBatchWriter(w, time.Millisecond, 1<<10)
	const lines = 20000 // ≈ 600 KB: more than the pipe and the batch hold
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range lines {
			fmt.Fprintf(bw, "line %05d %s\n", i, strings.Repeat("y", 19))
		}
		bw.Close()
		w.Close()
	}()
	select {
	case <-wrote:
		t.Fatal("every line was taken with no reader: the writer did not hold them back")
	case <-time.After(300 * time.Millisecond):
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	<-wrote
	sc := bufio.NewScanner(bytes.NewReader(b))
	i := 0
	for sc.Scan() {
		if want := fmt.Sprintf("line %05d %s", i, strings.Repeat("y", 19)); sc.Text() != want {
			t.Fatalf("line %d: %q, want %q", i, sc.Text(), want)
		}
		i++
	}
	if i != lines {
		t.Fatalf("%d lines read, want %d", i, lines)
	}
}
