// Package flush decides when the CommitLog is fsynced: group commit under
// SYNC_FLUSH, interval flushing under ASYNC_FLUSH (RocketMQ's
// flushIntervalCommitLog, flushCommitLogLeastPages and
// flushCommitLogThoroughInterval).
//
// Policy is a plain state machine: it never flushes, it says when to. At
// most one fsync runs at a time (the shell runs it off the actor and
// reports Done). Under SYNC_FLUSH every append starts one unless one runs;
// when it finishes, one fsync covers everything appended meanwhile: the
// fewer the fsyncs, the more sends each covers. Under ASYNC_FLUSH the shell
// calls Tick every Interval; a flush starts when at least LeastPages pages
// are dirty, or when anything is dirty and ThoroughInterval passed since
// the last thorough flush.
package flush

import "time"

// PageSize is the unit of flushCommitLogLeastPages.
const PageSize = 4096

// Config is the flush configuration, in RocketMQ's terms.
type Config struct {
	Sync             bool          // flushDiskType SYNC_FLUSH
	Interval         time.Duration // flushIntervalCommitLog (ASYNC_FLUSH)
	LeastPages       int           // flushCommitLogLeastPages
	ThoroughInterval time.Duration // flushCommitLogThoroughInterval
	// NeverFlush plants a bug (ASYNC_FLUSH never flushes on the interval)
	// for the simulator's self-test.
	NeverFlush bool
}

// Policy is the flush scheduler of one log.
type Policy struct {
	cfg          Config
	flushing     bool
	lastThorough time.Time
}

// New returns a policy; now starts the thorough-flush interval.
func New(cfg Config, now time.Time) *Policy {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Millisecond
	}
	return &Policy{cfg: cfg, lastThorough: now}
}

// TickEvery is how often the shell calls Tick (0: never, SYNC_FLUSH).
func (p *Policy) TickEvery() time.Duration {
	if p.cfg.Sync {
		return 0
	}
	return p.cfg.Interval
}

// Flushing reports whether an fsync runs.
func (p *Policy) Flushing() bool { return p.flushing }

// Appended reports that the log grew to end, durable up to flushed. Under
// SYNC_FLUSH it returns the target of an fsync to start now.
func (p *Policy) Appended(end, flushed int64) (target int64, start bool) {
	if !p.cfg.Sync {
		return 0, false
	}
	return p.maybe(end, flushed)
}

// Done reports a finished fsync. Under SYNC_FLUSH it starts the next one if
// the log grew meanwhile (and the fsync did not fail: a failure is sticky
// in the store, and flushing again cannot make anything durable).
func (p *Policy) Done(end, flushed int64, err error) (target int64, start bool) {
	p.flushing = false
	if !p.cfg.Sync || err != nil {
		return 0, false
	}
	return p.maybe(end, flushed)
}

// Tick is the ASYNC_FLUSH interval: it returns the target of an fsync to
// start now, if one is due.
func (p *Policy) Tick(now time.Time, end, flushed int64) (target int64, start bool) {
	if p.cfg.Sync || p.flushing || p.cfg.NeverFlush {
		return 0, false
	}
	dirty := end - flushed
	thorough := now.Sub(p.lastThorough) >= p.cfg.ThoroughInterval
	if dirty <= 0 || (!thorough && dirty < int64(p.cfg.LeastPages)*PageSize) {
		return 0, false
	}
	if thorough {
		p.lastThorough = now
	}
	p.flushing = true
	return end, true
}

func (p *Policy) maybe(end, flushed int64) (int64, bool) {
	if p.flushing || end <= flushed {
		return 0, false
	}
	p.flushing = true
	return end, true
}
