package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
)

// brokerGCPercent is the broker's GOGC unless the environment sets one.
// The broker's live heap is small (a few MiB: messages live in the mapped
// CommitLog, outside the Go heap), while every request allocates its
// frame; with Go's default of 100 the collector ran dozens of times a
// second under load, a fifth of the broker's CPU. 400 lets the heap grow
// to five times the live data between collections.
const brokerGCPercent = 400

// tuneGC applies brokerGCPercent and a soft memory limit (the smaller of
// 2 GiB and a quarter of RAM) so that the larger growth factor cannot run
// away when the live heap is large. GOGC and GOMEMLIMIT in the environment
// take precedence.
func tuneGC(log *slog.Logger) {
	gogc := os.Getenv("GOGC")
	if gogc == "" {
		debug.SetGCPercent(brokerGCPercent)
		gogc = fmt.Sprintf("%d (broker default)", brokerGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		limit := int64(2 << 30)
		var si syscall.Sysinfo_t
		if syscall.Sysinfo(&si) == nil {
			if q := int64(si.Totalram) * int64(si.Unit) / 4; q > 0 && q < limit {
				limit = q
			}
		}
		debug.SetMemoryLimit(limit)
	}
	// SetMemoryLimit with a negative value only reads the limit.
	log.Debug("garbage collector", "gogc", gogc, "memory_limit", debug.SetMemoryLimit(-1))
}
