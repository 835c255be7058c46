package app

import (
	"log/slog"
	"os"

	"github.com/surgekit/surge/internal/gctune"
)

// TuneGC starts the process's garbage-collector tuning for cfg.GCMinHeapMB (see
// internal/gctune) unless GOGC is set or the floor is 0, and returns the func that stops it.
// A server process calls it once, before serving; tests that build apps do not.
func TuneGC(cfg Config, log *slog.Logger) (stop func()) {
	if cfg.GCMinHeapMB == 0 {
		return func() {}
	}
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Info("GOGC is set: the collector is not tuned", "GOGC", v, "gc_min_heap_mb", cfg.GCMinHeapMB)
		return func() {}
	}
	return gctune.Start(uint64(cfg.GCMinHeapMB)<<20, 100)
}
