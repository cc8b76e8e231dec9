package main

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// e2eClientLogger is a client logger that writes to t.Log, so a failing
// end-to-end test shows what its clients did (go test prints t.Log only for
// failures and -v). Records after the test's cleanups are dropped: a client
// goroutine that logs late must not panic the test binary.
func e2eClientLogger(t *testing.T) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(w.close) // registered first, so it runs after the clients' Close
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log("client: " + strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
