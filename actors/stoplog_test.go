package actors

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// records keeps the messages of the records it handles.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// A message to an actor that is gone is logged as a dead letter while the
// broker runs, and not once it stops; other records pass either way.
func TestDeadLettersQuietOnceStopping(t *testing.T) {
	rec := &records{}
	var stopping atomic.Bool
	log := slog.New(stopQuiet{Handler: rec, stopping: &stopping}).With("lib", "protoactor")
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	defer sys.Shutdown()
	gone := sys.NewLocalPID("no-such-actor")
	sys.Root.Send(gone, &notifyTick{})
	if n := rec.count(deadLetterMsg); n != 1 {
		t.Fatalf("%d dead-letter records while running, want 1", n)
	}
	stopping.Store(true)
	sys.Root.Send(gone, &notifyTick{})
	log.Info("other")
	if n := rec.count(deadLetterMsg); n != 1 {
		t.Fatalf("%d dead-letter records after the stop began, want still 1", n)
	}
	if rec.count("other") != 1 {
		t.Fatal("a record other than a dead letter was dropped")
	}
}
