package testenv

import (
	"bytes"
	"runtime"
)

// Goroutines returns the stack of every goroutine, one entry each, for tests that count the
// goroutines of a package or a function.
func Goroutines() [][]byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Split(buf[:n], []byte("\n\n"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// CountGoroutines counts the goroutines whose stack contains s.
func CountGoroutines(s string) int {
	n := 0
	for _, g := range Goroutines() {
		if bytes.Contains(g, []byte(s)) {
			n++
		}
	}
	return n
}
