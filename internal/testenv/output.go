package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for a process's writer goroutine (exec.Cmd's Stderr) and
// the test reading it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// LineWriter sends each complete line written to it on Lines, dropping lines when nobody
// reads: for waiting on a line of a process's output without blocking the process.
type LineWriter struct {
	partial []byte
	lines   chan string
}

// NewLineWriter buffers up to n unread lines.
func NewLineWriter(n int) *LineWriter { return &LineWriter{lines: make(chan string, n)} }

// Lines delivers the lines, without their line ending.
func (w *LineWriter) Lines() <-chan string { return w.lines }

func (w *LineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		select {
		case w.lines <- line:
		default:
		}
	}
}
