package main

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
)

func TestTuneProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Setenv("GOMAXPROCS", "")
	tuneProcs(log)
	if got, want := runtime.GOMAXPROCS(0), defaultProcs+brokerExtraProcs; got != want {
		t.Fatalf("GOMAXPROCS unset: got %d Ps, want %d (the CPUs and a spare P)", got, want)
	}
	tuneProcs(log) // a restarted broker: still the CPUs plus the extra, not more
	if got, want := runtime.GOMAXPROCS(0), defaultProcs+brokerExtraProcs; got != want {
		t.Fatalf("tuned twice: got %d Ps, want %d", got, want)
	}

	runtime.GOMAXPROCS(1)
	t.Setenv("GOMAXPROCS", "1")
	tuneProcs(log)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS=1 in the environment: got %d Ps, want 1 (the operator's choice wins)", got)
	}
}
