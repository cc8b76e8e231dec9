package client

import (
	"context"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// syncCall is a blocking call's state: its pending call (the channel the
// reader answers on), the timer of its timeout, and the context its waits
// use. It is pooled: a sync send allocated a timer context, its timer and
// a channel per call, a tenth of a sync publisher's CPU with 64 of them on
// one connection. One that may still be answered (given up on while the
// reader held its pending call) is not put back.
type syncCall struct {
	pc    pendingCall
	timer *time.Timer
	ctx   callCtx
}

var syncCalls = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &syncCall{pc: pendingCall{ch: make(chan *protocol.Frame, 1)}, timer: t}
}}

// getSyncCall returns a syncCall whose context is ctx bounded by timeout
// from start (timeout <= 0: ctx alone) and whose timer runs for timeout.
func getSyncCall(ctx context.Context, start time.Time, timeout time.Duration) (*syncCall, context.Context) {
	sc := syncCalls.Get().(*syncCall)
	if timeout <= 0 {
		return sc, ctx
	}
	sc.ctx = callCtx{Context: ctx, deadline: start.Add(timeout)}
	sc.timer.Reset(timeout)
	return sc, &sc.ctx
}

// timedOut is the channel that fires at the call's timeout (nil: none).
func (sc *syncCall) timedOut() <-chan time.Time {
	if sc.ctx.Context == nil {
		return nil
	}
	return sc.timer.C
}

// release stops the call's timer and context and, if reuse, pools it:
// reuse only when nobody can answer it any more (its pending call was
// answered, taken back, or never queued). A call whose context made its
// inner context is not reused either: a dial's context may still read it
// from its own goroutine. Since Go 1.23 a stopped timer delivers nothing
// stale, so the next call's Reset starts clean.
func (sc *syncCall) release(reuse bool) {
	sc.timer.Stop()
	if sc.ctx.inner != nil {
		sc.ctx.cancel()
		return
	}
	if reuse {
		sc.ctx = callCtx{}
		syncCalls.Put(sc)
	}
}

// callCtx is the caller's context bounded by a call's deadline. The timer
// context behind Done is made only when a wait asks for it (a dial, room
// in a full write buffer, another caller's dial): a call that finds its
// connection up and room in the buffer waits on the pooled timer alone.
// Done and Err are the calling goroutine's (a dial's context may read them
// from its own goroutine, after Done made the inner context).
type callCtx struct {
	context.Context // the caller's
	deadline        time.Time
	inner           context.Context
	cancel          context.CancelFunc
}

func (c *callCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *callCtx) Done() <-chan struct{} {
	if c.inner == nil {
		c.inner, c.cancel = context.WithDeadline(c.Context, c.deadline)
	}
	return c.inner.Done()
}

func (c *callCtx) Err() error {
	if c.inner != nil {
		return c.inner.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}
