package actors

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// deadLetterMsg is the message of protoactor's dead-letter records.
const deadLetterMsg = "[DeadLetter]"

// stopQuiet is the slog handler of protoactor's logger: once stopping is
// set it drops dead-letter records. While a broker stops, its links and
// connections close and report to actors already gone (a controller link
// to the stopped ctlclient, a slave's link to the stopped writer): expected
// then, and alarming noise at the end of every clean shutdown. At any other
// time a dead letter is a message lost between actors, and is logged.
type stopQuiet struct {
	slog.Handler
	stopping *atomic.Bool
}

func (h stopQuiet) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == deadLetterMsg && h.stopping.Load() {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h stopQuiet) WithAttrs(as []slog.Attr) slog.Handler {
	return stopQuiet{Handler: h.Handler.WithAttrs(as), stopping: h.stopping}
}

func (h stopQuiet) WithGroup(name string) slog.Handler {
	return stopQuiet{Handler: h.Handler.WithGroup(name), stopping: h.stopping}
}
