// Package flush decides when the CommitLog is fsynced: group commit under
// SYNC_FLUSH, interval flushing under ASYNC_FLUSH (RocketMQ's
// flushIntervalCommitLog, flushCommitLogLeastPages and
// flushCommitLogThoroughInterval).
//
// Policy is a plain state machine: it never flushes, it says when to. At
// most one fsync runs at a time (the shell runs it off the actor and
// reports Done). Under SYNC_FLUSH every append starts one unless one runs;
// when it finishes, one fsync covers everything appended meanwhile: the
// fewer the fsyncs, the more sends each covers. That next fsync is not
// decided on the actor: a SYNC_FLUSH flush is a series (Follows), in which
// the job that ran one fsync starts the next by Next, from the log's end it
// reads, and only the series' end is reported as Done. The disk goes from
// one fsync to the next as the probe's single flusher does, without the
// hop through the actor's mailbox and its answers (the disk sat idle
// nearly half the time on two busy cores: docs/BENCHMARKS.md, issue 17).
// Under ASYNC_FLUSH the shell calls Tick every Interval; a flush starts
// when at least LeastPages pages are dirty, or when anything is dirty and
// ThoroughInterval passed since the last thorough flush. With a Chunk, an
// interval flush covers the log up to its end at the Tick in flushes one
// after the other, each of Chunk bytes or, when the interval's bytes would
// make more than MaxChunks of those, of a MaxChunks-th of them (see
// Config.Chunk).
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
	// Chunk (ASYNC_FLUSH; 0: no limit) is the most one flush covers: an
	// interval flush goes on in chunks, each started by Done, until the
	// log's end at the Tick is covered. A goroutine blocked in msync keeps
	// its P; 500 ms of a 10 MB/s log in one msync held it 5-7 ms, and with
	// the connections' event loop blocked in epoll_wait on the other of two
	// Ps, nothing else ran (docs/BENCHMARKS.md, issue 17).
	Chunk int64
	// MaxChunks (with a Chunk; 0: no limit) is the most flushes an
	// interval flush is cut into: chunks grow past Chunk when the log
	// wrote more than MaxChunks of them in the interval. Each msync has a
	// cost of its own (the file system's write-back pass, extent updates,
	// the device's cache flush): a 300 MB/s log flushed in 512 KiB chunks,
	// about 300 msyncs per interval, spent 0.3-0.4 CPU s per million 1 KiB
	// messages on them, against 0.07-0.12 in 4 MiB chunks. A log busy
	// enough to write that much keeps the runtime's sysmon awake, which
	// takes a P back from a goroutine blocked in a syscall within
	// microseconds; the stalls that made Chunk came from a paced log,
	// whose chunks stay small.
	MaxChunks int64
	// NeverFlush plants a bug (ASYNC_FLUSH never flushes on the interval)
	// for the simulator's self-test.
	NeverFlush bool
}

// Policy is the flush scheduler of one log.
type Policy struct {
	cfg          Config
	flushing     bool
	lastThorough time.Time
	goal         int64 // ASYNC_FLUSH: the log's end at the Tick that started the flushes in chunks
	target       int64 // ASYNC_FLUSH: the running flush's target
	step         int64 // ASYNC_FLUSH: the chunk size of the running interval flush
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

// Follows reports whether the flushes this policy starts are series
// (SYNC_FLUSH): after each fsync the job asks Next for the next one, and
// Done is called once, when Next says the series ends. Each fsync's
// result is still reported to the actor (the gate's flushed offset), but
// not to the policy.
func (p *Policy) Follows() bool { return p.cfg.Sync }

// Next is the rule of a series, run by the job off the actor after each
// fsync: the one that was asked for target, which made the log durable up
// to flushed, with the log's end now at end. The next fsync's target is
// the log's end, if the log grew past what is flushed, the fsync did not
// fail (a failure is sticky in the store) and it covered its target (a
// short one ends the series; Done decides on the actor). It reads nothing
// but its arguments, so it is safe on any goroutine.
func Next(target, end, flushed int64, err error) (next int64, more bool) {
	if err != nil || flushed < target || end <= flushed {
		return 0, false
	}
	return end, true
}

// Done reports a finished fsync (under SYNC_FLUSH: the end of a series).
// Under SYNC_FLUSH it starts the next one if the log grew meanwhile (since
// Next last looked; and the fsync did not fail: a failure is sticky in the
// store, and flushing again cannot make anything durable).
func (p *Policy) Done(end, flushed int64, err error) (target int64, start bool) {
	p.flushing = false
	if err != nil {
		return 0, false
	}
	if !p.cfg.Sync {
		if flushed >= p.goal || flushed < p.target {
			return 0, false // done, or a chunk fell short: the next Tick retries
		}
		p.flushing = true
		return p.chunk(flushed), true
	}
	return p.maybe(end, flushed)
}

// chunk is the target of the next interval flush from flushed.
func (p *Policy) chunk(flushed int64) int64 {
	p.target = p.goal
	if p.step > 0 {
		p.target = min(p.goal, flushed+p.step)
	}
	return p.target
}

// stepFor is the chunk size of an interval flush of dirty bytes.
func (c *Config) stepFor(dirty int64) int64 {
	if c.Chunk <= 0 {
		return 0
	}
	if c.MaxChunks > 0 {
		return max(c.Chunk, (dirty+c.MaxChunks-1)/c.MaxChunks)
	}
	return c.Chunk
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
	p.goal = end
	p.step = p.cfg.stepFor(dirty)
	return p.chunk(flushed), true
}

func (p *Policy) maybe(end, flushed int64) (int64, bool) {
	if p.flushing || end <= flushed {
		return 0, false
	}
	p.flushing = true
	return end, true
}
