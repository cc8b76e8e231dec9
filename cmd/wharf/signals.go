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
func waitForStop(ctx context.Context, log *slog.Logger) {
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
	}
}
