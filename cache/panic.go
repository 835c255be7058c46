package cache

import (
	"fmt"
	"runtime/debug"
)

// PanicError is the error every caller sharing a load gets when the loader panicked. The
// panic is recovered where the loader runs: x/sync's singleflight would re-panic it in a
// goroutine of its own, where no caller can recover, and kill the process. The load's lease
// is released at once, as after any failed load.
type PanicError struct {
	Value any    // what the loader panicked with
	Stack []byte // the loading goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("cache: loader panicked: %v", e.Value) }

// guard runs fn and turns a panic in it into a *PanicError.
func guard[T any](fn func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}
