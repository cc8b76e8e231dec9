package netio

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// gnet's logger is process-global (every gnet.Run installs the one it is
// given as the package default), so netio installs one adapter, bound once
// to the slog.Logger of the first Server started, and hands the same adapter
// to every engine.
var (
	gnetLogger     = &slogAdapter{}
	gnetLoggerOnce sync.Once
)

func setGnetLogger(l *slog.Logger) {
	gnetLoggerOnce.Do(func() { gnetLogger.l = l.With("component", "gnet") })
}

// slogAdapter forwards gnet's warnings and errors to slog; gnet's debug and
// info chatter ("Launching gnet with N event-loops") is dropped.
type slogAdapter struct{ l *slog.Logger }

var _ logging.Logger = (*slogAdapter)(nil)

func (a *slogAdapter) log(level slog.Level, format string, args ...any) {
	l := a.l
	if l == nil {
		l = slog.Default()
	}
	if !l.Enabled(context.Background(), level) {
		return
	}
	l.Log(context.Background(), level, fmt.Sprintf(format, args...))
}

func (*slogAdapter) Debugf(string, ...any)               {}
func (*slogAdapter) Infof(string, ...any)                {}
func (a *slogAdapter) Warnf(format string, args ...any)  { a.log(slog.LevelWarn, format, args...) }
func (a *slogAdapter) Errorf(format string, args ...any) { a.log(slog.LevelError, format, args...) }

// Fatalf is logged as an error: a library does not get to exit the process.
func (a *slogAdapter) Fatalf(format string, args ...any) {
	a.log(slog.LevelError, "fatal: "+format, args...)
}
