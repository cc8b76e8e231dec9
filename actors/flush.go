package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
)

// flushWait asks the FlushActor (SYNC_FLUSH) to make the log durable up to
// its current end and then release replies.
type flushWait struct{ replies []*pendingReply }

// flushDone reports a finished fsync.
type flushDone struct {
	flushed int64
	err     error
}

// flushTick drives ASYNC_FLUSH and the SYNC_FLUSH timeouts.
type flushTick struct{}

// logFlushed tells the Reput actor how far the log is durable (SYNC_FLUSH:
// consumers only see durable messages).
type logFlushed struct{ offset int64 }

// flushActor owns the log's flushing.
//
// SYNC_FLUSH is group commit: while one fsync runs (off the actor), every
// reply that arrives waits; when it finishes, the replies it covers are
// released and one fsync covers all the rest. A reply whose data is not
// durable after syncFlushTimeout gets FLUSH_DISK_TIMEOUT (stored, durability
// unconfirmed), never OK. A failed fsync is sticky in the store; every
// waiting and later reply gets FLUSH_DISK_TIMEOUT and the writer refuses new
// writes.
//
// ASYNC_FLUSH flushes every flushIntervalCommitLog if at least
// flushCommitLogLeastPages pages are dirty, and everything every
// flushCommitLogThoroughInterval.
type flushActor struct {
	b            *Broker
	waiters      []*pendingReply
	flushing     bool
	timerArmed   bool
	lastThorough time.Time
}

const pageSize = 4096

func (f *flushActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.lastThorough = f.b.env.Clock.Now()
		if f.b.cfg.FlushDiskType != SyncFlush {
			f.arm(ctx, f.b.cfg.FlushIntervalCommitLog)
		}
	case *flushWait:
		now := f.b.env.Clock.Now()
		for _, r := range m.replies {
			r.start = now
		}
		if f.b.k.faults.AckBeforeFlush {
			for _, r := range m.replies {
				f.b.respond(r.request, protocol.StatusOK, "", r.ok)
			}
			m.replies = nil
		}
		f.waiters = append(f.waiters, m.replies...)
		f.startFlush(ctx)
		if len(f.waiters) > 0 && !f.timerArmed {
			f.arm(ctx, f.b.cfg.SyncFlushTimeout)
		}
	case *flushDone:
		f.flushing = false
		f.done(ctx, m)
	case *flushTick:
		f.timerArmed = false
		if f.b.cfg.FlushDiskType == SyncFlush {
			if !f.b.k.faults.NoFlushTimeout {
				f.expire(ctx)
			}
		} else {
			f.asyncTick(ctx)
			f.arm(ctx, f.b.cfg.FlushIntervalCommitLog)
		}
	case *actor.Stopping:
		// Final flush so nothing waits forever: reply to every waiter.
		cl := f.b.store.CommitLog()
		flushed, err := f.b.store.Flush(cl.MaxOffset())
		f.done(ctx, &flushDone{flushed: flushed, err: err})
		f.releaseAll(protocol.StatusFlushDiskTimeout, "broker shutting down before the flush completed")
	}
}

func (f *flushActor) arm(ctx actor.Context, d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	f.timerArmed = true
	f.b.after(d, ctx.Self(), &flushTick{})
}

// startFlush runs one fsync of everything appended so far, off the actor.
func (f *flushActor) startFlush(ctx actor.Context) {
	if f.flushing {
		return
	}
	st := f.b.store
	target := st.CommitLog().MaxOffset()
	if target <= st.CommitLog().FlushedOffset() && st.CommitLog().Err() == nil {
		f.done(ctx, &flushDone{flushed: st.CommitLog().FlushedOffset()})
		return
	}
	f.flushing = true
	self, root := ctx.Self(), f.b.sys.Root
	f.b.env.RunIO(func() {
		flushed, err := st.Flush(target)
		root.Send(self, &flushDone{flushed: flushed, err: err})
	})
}

func (f *flushActor) done(ctx actor.Context, m *flushDone) {
	if m.err != nil {
		f.b.log.Error("commitlog fsync failed: data since the last successful flush may be lost; refusing writes", "err", m.err, "flushed", m.flushed)
		f.releaseAll(protocol.StatusFlushDiskTimeout, fmt.Sprintf("fsync failed, durability unknown: %v", m.err))
	}
	keep := f.waiters[:0]
	for _, r := range f.waiters {
		if r.end <= m.flushed {
			f.b.respond(r.request, protocol.StatusOK, "", r.ok)
			continue
		}
		keep = append(keep, r)
	}
	clear(f.waiters[len(keep):])
	f.waiters = keep
	if f.b.cfg.FlushDiskType == SyncFlush {
		ctx.Send(f.b.p.reput, &logFlushed{offset: m.flushed})
		if f.b.p.replicator != nil && f.b.isSyncMaster() {
			ctx.Send(f.b.p.replicator, &logFlushed{offset: m.flushed})
		}
	}
	if m.err == nil && (len(f.waiters) > 0 || f.b.store.CommitLog().MaxOffset() > m.flushed) && f.b.cfg.FlushDiskType == SyncFlush {
		f.startFlush(ctx)
	}
}

// expire answers waiters older than syncFlushTimeout with FLUSH_DISK_TIMEOUT.
func (f *flushActor) expire(ctx actor.Context) {
	timeout := f.b.cfg.SyncFlushTimeout
	var next time.Duration
	f.waiters, next = expireWaiters(f.waiters, f.b.env.Clock.Now(), timeout, func(r *pendingReply) {
		f.b.respond(r.request, protocol.StatusFlushDiskTimeout,
			fmt.Sprintf("stored, but not flushed within syncFlushTimeout %v", timeout), nil)
	})
	if next >= 0 {
		f.arm(ctx, next)
	}
}

// expireWaiters answers, with expired, every waiter at least timeout old,
// and returns the others (in place) with the time until the next one
// expires (-1 if none is left).
func expireWaiters(waiters []*pendingReply, now time.Time, timeout time.Duration, expired func(*pendingReply)) ([]*pendingReply, time.Duration) {
	keep := waiters[:0]
	var next time.Duration = -1
	for _, w := range waiters {
		age := now.Sub(w.start)
		if age >= timeout {
			expired(w)
			continue
		}
		if left := timeout - age; next < 0 || left < next {
			next = left
		}
		keep = append(keep, w)
	}
	clear(waiters[len(keep):])
	return keep, next
}

func (f *flushActor) releaseAll(st protocol.Status, remark string) {
	for _, r := range f.waiters {
		f.b.respond(r.request, st, remark, nil)
	}
	clear(f.waiters)
	f.waiters = f.waiters[:0]
}

func (f *flushActor) asyncTick(ctx actor.Context) {
	if f.flushing || f.b.k.faults.AsyncNeverFlush {
		return
	}
	cl := f.b.store.CommitLog()
	now := f.b.env.Clock.Now()
	dirty := cl.MaxOffset() - cl.FlushedOffset()
	thorough := now.Sub(f.lastThorough) >= f.b.cfg.FlushCommitLogThoroughInterval
	if dirty <= 0 || (!thorough && dirty < int64(f.b.cfg.FlushCommitLogLeastPages)*pageSize) {
		return
	}
	if thorough {
		f.lastThorough = now
	}
	f.startFlush(ctx)
}
