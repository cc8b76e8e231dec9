package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// waitForStop blocks until SIGINT or SIGTERM arrives or ctx ends (nil:
// never), and logs which: every daemon of the binary shuts down the same
// way.
func waitForStop(ctx context.Context, log *slog.Logger) { waitForStopOr(ctx, log, nil) }

// waitForStopOr is waitForStop that also ends on a request on restart; it
// reports whether that was the reason.
func waitForStopOr(ctx context.Context, log *slog.Logger, restart <-chan string) bool {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case <-ctx.Done():
		log.Info("shutting down", "reason", ctx.Err())
	case why := <-restart:
		log.Warn("the broker stops to start again on its store", "reason", why)
		return true
	}
	return false
}
