package gate

import (
	"fmt"
	"slices"
	"time"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/protocol"
)

// Mode is what the broker's configuration promises an acknowledged send.
type Mode struct {
	SyncFlush      bool          // flushDiskType SYNC_FLUSH
	SyncMaster     bool          // brokerRole SYNC_MASTER
	InSyncReplicas int           // copies a SYNC_MASTER send needs, the master's included
	FlushTimeout   time.Duration // syncFlushTimeout
	SlaveTimeout   time.Duration // slaveTimeout
	// Controller is controller mode: a waiting send is answered OK once
	// every slave of the ack set (SetAckSet: the SyncStateSet, or its
	// union with a proposed one while a change is in flight) acknowledged
	// it, besides the flush SyncFlush asks; an empty set means the master
	// alone. SyncMaster and InSyncReplicas do not apply.
	Controller bool

	// Planted bugs (the simulator's self-test); all false in production.
	AckBeforeFlush   bool // SYNC_FLUSH: OK before the flush
	NoFlushTimeout   bool // SYNC_FLUSH: never FLUSH_DISK_TIMEOUT
	AckBeforeReplica bool // SYNC_MASTER: OK before a slave has the bytes
	AckOldSet        bool // controller mode: SetAckSet never adds a member
}

// Waits reports whether a send must wait for the gate: one that waits for
// durability (wait: WAIT is true and it is not oneway) under a mode that
// promises more than the page cache. Every other send is answered OK at
// once, wherever it was stored (the writer answers those itself).
func (m Mode) Waits(wait bool) bool { return wait && (m.SyncFlush || m.replicated()) }

// replicated reports whether a waiting send waits for slaves' copies.
func (m Mode) replicated() bool { return m.SyncMaster || m.Controller }

// SlaveAck is one slave's acknowledged offset, by its broker id.
type SlaveAck struct {
	BrokerID int64
	Acked    int64 // every byte below is on the slave
	Flushed  int64 // every byte below is fsynced on the slave (<= Acked)
}

// Verdict is the answer to one admitted send.
type Verdict struct {
	Token  any // what Admit was given
	Status protocol.Status
	Remark string
}

// Ready is the gate's output since the last call of Ready.
type Ready struct {
	Verdicts []Verdict
	// Deadline is when Tick must be called next (zero: no waiter can time
	// out). It is the earliest deadline of a waiter.
	Deadline time.Time
}

type waiter struct {
	tok       any
	end       int64
	deadline  time.Time
	needFlush bool
	needRepl  bool
}

// Gate holds the sends that wait for durability. The zero value is not
// usable: use New.
type Gate struct {
	mode     Mode
	flushed  int64      // every byte below is durable on this broker's disk
	fsyncErr error      // sticky
	acked    []int64    // each connected slave's acknowledged offset
	inSync   int        // slaves within haMaxGapNotInSync
	ackSet   []int64    // controller mode: the slaves every send waits for
	byID     []SlaveAck // controller mode: each connected slave's acknowledged offset
	confirm  int64      // controller mode: the confirm offset (Confirm), never moving back
	waiting  []waiter
	out      []Verdict
	stopped  bool
}

// New returns a gate for mode; flushed is the log's durable end at start.
func New(mode Mode, flushed int64) *Gate {
	return &Gate{mode: mode, flushed: flushed}
}

// Mode returns the gate's mode.
func (g *Gate) Mode() Mode { return g.mode }

// SetMode changes the mode (a role change); waiters are judged by the new
// mode from now on, their deadlines kept.
func (g *Gate) SetMode(now time.Time, m Mode) {
	g.mode = m
	g.release(now)
}

// Waiting is how many sends wait.
func (g *Gate) Waiting() int { return len(g.waiting) }

// Admit hands the gate a send stored up to end (the log offset after its
// last byte). wait is false for a send that does not wait for durability
// (WAIT=false or oneway). A send decided at once is returned (ok true) and
// tok is not kept; otherwise the gate holds tok and answers it through
// Ready.
func (g *Gate) Admit(now time.Time, tok any, end int64, wait bool) (v Verdict, ok bool) {
	m := g.mode
	switch {
	case g.stopped:
		return Verdict{Token: tok, Status: protocol.StatusServiceNotAvailable, Remark: "broker shutting down"}, true
	case !m.Waits(wait):
		return Verdict{Token: tok, Status: protocol.StatusOK}, true
	case m.SyncMaster && !m.Controller && g.inSync+1 < m.InSyncReplicas:
		// Never an OK without the slaves' copies: with too few slaves in
		// sync, say so at once (the message is stored on the master).
		return Verdict{Token: tok, Status: protocol.StatusSlaveNotAvailable, Remark: fmt.Sprintf(
			"stored on the master only: %d of the %d copies inSyncReplicas asks for are in sync", g.inSync+1, m.InSyncReplicas)}, true
	}
	w := waiter{tok: tok, end: end, needFlush: m.SyncFlush, needRepl: m.replicated()}
	if w.needRepl {
		w.deadline = now.Add(m.SlaveTimeout)
	} else {
		w.deadline = now.Add(m.FlushTimeout)
	}
	if n := len(g.waiting); n > 0 {
		invariant.Check(g.waiting[n-1].end <= end, "gate: sends admitted out of log order")
	}
	g.waiting = append(g.waiting, w)
	g.release(now)
	return Verdict{}, false
}

// Flushed reports that every byte below offset is durable.
func (g *Gate) Flushed(now time.Time, offset int64) {
	if offset > g.flushed {
		g.flushed = offset
	}
	g.release(now)
}

// FlushFailed reports a failed fsync: durability since the last good one is
// unknown, now and for every later flush waiter.
func (g *Gate) FlushFailed(now time.Time, err error) {
	if g.fsyncErr == nil {
		g.fsyncErr = err
	}
	g.release(now)
}

// Replicas reports each connected slave's acknowledged offset and how many
// of them are in sync. The gate keeps its own copy of acked.
func (g *Gate) Replicas(now time.Time, acked []int64, inSync int) {
	g.acked = append(g.acked[:0], acked...)
	g.inSync = inSync
	g.release(now)
}

// SetAckSet sets the broker ids of the slaves whose acknowledgement every
// waiting send needs under controller mode (empty: none). Waiters are
// judged by the new set from now on: one covered by the old set but not
// by the new one goes on waiting (an expansion must not let a send
// through on the old set's word).
func (g *Gate) SetAckSet(now time.Time, ids []int64) {
	if g.mode.AckOldSet {
		ids = keepOld(g.ackSet, ids)
	}
	g.ackSet = append(g.ackSet[:0], ids...)
	g.release(now)
}

// keepOld is the planted bug AckOldSet: of the new set ids, only the
// members the old set had (an expansion is ignored, a shrink taken).
func keepOld(old, ids []int64) []int64 {
	var kept []int64
	for _, id := range ids {
		if slices.Contains(old, id) {
			kept = append(kept, id)
		}
	}
	return kept
}

// SlaveAcks reports each connected slave's acknowledged offset by broker
// id (controller mode). The gate keeps its own copy.
func (g *Gate) SlaveAcks(now time.Time, acks []SlaveAck) {
	g.byID = append(g.byID[:0], acks...)
	g.release(now)
}

// Tick answers the waiters whose deadline passed.
func (g *Gate) Tick(now time.Time) {
	keep := g.waiting[:0]
	for _, w := range g.waiting {
		if now.Before(w.deadline) || (w.needFlush && !w.needRepl && g.mode.NoFlushTimeout) {
			keep = append(keep, w)
			continue
		}
		g.timeout(w, "")
	}
	clear(g.waiting[len(keep):])
	g.waiting = keep
}

// Stop answers every waiter with its timeout status (the shell flushes and
// reports Flushed first, so what is durable is answered OK) and refuses
// later admissions.
func (g *Gate) Stop(now time.Time) {
	g.Drain(now, "broker shutting down")
	g.stopped = true
}

// Drain answers every waiter now: OK if its promise holds, else its
// timeout status, the remark saying why (a role change, a shutdown).
func (g *Gate) Drain(now time.Time, why string) {
	g.release(now)
	for _, w := range g.waiting {
		g.timeout(w, why+" before ")
	}
	clear(g.waiting)
	g.waiting = g.waiting[:0]
}

// Ready returns the verdicts since the last call and the next deadline.
// The Verdicts slice is valid until the next call of any method.
func (g *Gate) Ready() Ready {
	rd := Ready{Verdicts: g.out}
	for _, w := range g.waiting {
		if w.needFlush && !w.needRepl && g.mode.NoFlushTimeout {
			continue
		}
		if rd.Deadline.IsZero() || w.deadline.Before(rd.Deadline) {
			rd.Deadline = w.deadline
		}
	}
	g.out = g.out[:0]
	return rd
}

func (g *Gate) answer(tok any, st protocol.Status, remark string) {
	g.out = append(g.out, Verdict{Token: tok, Status: st, Remark: remark})
}

// copies counts the copies of everything below end: the master's and each
// slave's that acknowledged it.
func (g *Gate) copies(end int64) int {
	n := 1
	for _, a := range g.acked {
		if a >= end {
			n++
		}
	}
	return n
}

// setHas reports whether every slave of the ack set holds end as the
// mode requires (holds).
func (g *Gate) setHas(end int64) bool {
	for _, id := range g.ackSet {
		if g.holds(id) < end {
			return false
		}
	}
	return true
}

// holds is how far slave id holds the log as the mode requires: under
// SYNC_FLUSH its fsynced copy (the master promises a flushed message, so
// a copy in the slave's page cache, lost with its power, is not one),
// else its appended copy. A member not connected holds nothing; one
// connected twice (a reconnect not yet noticed) holds the better copy.
func (g *Gate) holds(id int64) int64 {
	var h int64
	for _, a := range g.byID {
		switch {
		case a.BrokerID != id:
		case g.mode.SyncFlush:
			h = max(h, a.Flushed)
		default:
			h = max(h, a.Acked)
		}
	}
	return h
}

// Confirm is the confirm offset under controller mode: how far the master
// (its log ends at logEnd) and every slave of the ack set hold the log as
// the mode requires (the master's flush under SYNC_FLUSH, its log end
// otherwise). Consumers see nothing past it: a message below it survives
// the election of any member of the SyncStateSet. floor is where the
// master's epoch began: what it held when it was elected is the truth of
// its epoch, confirmed or not. The offset never moves back: what
// consumers saw stays seen, even when the set grows by a member still
// catching up.
func (g *Gate) Confirm(logEnd, floor int64) int64 {
	c := logEnd
	if g.mode.SyncFlush {
		c = min(c, g.flushed)
	}
	for _, id := range g.ackSet {
		c = min(c, g.holds(id))
	}
	g.confirm = max(g.confirm, c, min(floor, logEnd))
	return g.confirm
}

// release answers every waiter whose promise holds (or can no longer).
// Waiters are in log order and what covers an offset covers every lower
// one (a flush, a slave's acknowledgement), so the released ones are a
// prefix: the scan stops at the first that must go on waiting, which keeps
// an admission O(1) while nothing new is covered.
func (g *Gate) release(time.Time) {
	i := 0
	for ; i < len(g.waiting); i++ {
		w := g.waiting[i]
		switch {
		case w.needFlush && g.fsyncErr != nil:
			g.answer(w.tok, protocol.StatusFlushDiskTimeout, fmt.Sprintf("fsync failed, durability unknown: %v", g.fsyncErr))
		case g.covered(w):
			g.answer(w.tok, protocol.StatusOK, "")
		default:
			goto done
		}
	}
done:
	if i > 0 {
		n := copy(g.waiting, g.waiting[i:])
		clear(g.waiting[n:])
		g.waiting = g.waiting[:n]
	}
}

func (g *Gate) covered(w waiter) bool {
	m := g.mode
	flushOK := !w.needFlush || g.flushed >= w.end || m.AckBeforeFlush
	if w.needRepl {
		if m.AckBeforeReplica {
			return true
		}
		if m.Controller {
			return flushOK && g.setHas(w.end)
		}
		return flushOK && g.copies(w.end) >= m.InSyncReplicas
	}
	return flushOK
}

func (g *Gate) timeout(w waiter, prefix string) {
	if w.needFlush && g.flushed < w.end {
		d := g.mode.FlushTimeout
		if w.needRepl {
			d = g.mode.SlaveTimeout
		}
		if prefix != "" {
			g.answer(w.tok, protocol.StatusFlushDiskTimeout, prefix+"the flush completed")
			return
		}
		if w.needRepl {
			g.answer(w.tok, protocol.StatusFlushDiskTimeout, fmt.Sprintf("stored, but not flushed within slaveTimeout %v", d))
			return
		}
		g.answer(w.tok, protocol.StatusFlushDiskTimeout, fmt.Sprintf("stored, but not flushed within syncFlushTimeout %v", d))
		return
	}
	if prefix != "" {
		g.answer(w.tok, protocol.StatusFlushSlaveTimeout, prefix+"the slave acknowledged")
		return
	}
	if g.mode.Controller {
		g.answer(w.tok, protocol.StatusFlushSlaveTimeout,
			fmt.Sprintf("stored on the master, but not acknowledged by every slave of the SyncStateSet %v within slaveTimeout %v", g.ackSet, g.mode.SlaveTimeout))
		return
	}
	g.answer(w.tok, protocol.StatusFlushSlaveTimeout,
		fmt.Sprintf("stored on the master, but no slave acknowledged it within slaveTimeout %v", g.mode.SlaveTimeout))
}
