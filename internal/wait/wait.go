// Package wait holds the context-aware pause that background loops share.
package wait

import (
	"context"
	"time"
)

// Sleep waits d; false if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
