package ctlagent

import (
	"slices"
	"time"
)

// isMaster reports whether this broker is the master of the current epoch
// and has carried the role out.
func (a *Agent) isMaster() bool {
	return a.applied != nil && a.applied.Master && a.haveInfo && a.brokerID != 0 &&
		a.info.MasterID == a.brokerID && a.applied.Epoch == a.info.MasterEpoch
}

// lagging reports whether set member id has been behind, or away, for
// longer than SlaveNotCatchup (or is unknown to replication).
func (a *Agent) lagging(id int64) bool {
	s := a.slaves[id]
	return s == nil || !s.connected ||
		!s.behindSince.IsZero() && a.now.Sub(s.behindSince) >= a.cfg.SlaveNotCatchup
}

// track starts or ends the wait for a slave close behind: while it lasts
// the slave is in AckSet, so that new sends wait for it, and once it holds
// everything below the master's end at the wait's start it is proposed
// into the set. Without the wait a slave under steady load may never be
// exactly at the master's end when its progress is seen.
func (a *Agent) track(now time.Time) {
	if !a.isMaster() {
		a.candidate = 0
		return
	}
	if c := a.candidate; c != 0 {
		s := a.slaves[c]
		switch {
		case slices.Contains(a.info.Set, c):
			a.candidate = 0
		case s == nil || !s.connected || now.Sub(a.candidateSince) >= a.cfg.SlaveNotCatchup:
			// Too slow to catch up: sends stop waiting for it, and it is
			// not waited for again before as long has passed.
			a.candidate = 0
			a.gaveUp[c] = now
		}
	}
	if a.candidate != 0 || a.cfg.CatchupGap <= 0 {
		return
	}
	for _, id := range a.slaveIDs() {
		s := a.slaves[id]
		gap := a.store.MaxOffset - s.acked
		rested := a.gaveUp[id].IsZero() || now.Sub(a.gaveUp[id]) >= a.cfg.SlaveNotCatchup
		if !slices.Contains(a.info.Set, id) && s.connected && gap > 0 && gap <= a.cfg.CatchupGap && rested {
			a.candidate, a.candidateSince, a.candidateUntil = id, now, a.store.MaxOffset
			return
		}
	}
}

func (a *Agent) slaveIDs() []int64 {
	ids := make([]int64, 0, len(a.slaves))
	for id := range a.slaves {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// alterTo is the SyncStateSet the master should propose now, or nil if the
// current one is right. Members behind or away for SlaveNotCatchup leave;
// slaves that hold everything the master may have acknowledged join: all
// below its end, or below the end at the start of their wait.
func (a *Agent) alterTo() []int64 {
	if !a.isMaster() {
		return nil
	}
	next := []int64{a.brokerID}
	for _, id := range a.info.Set {
		if id != a.brokerID && !a.lagging(id) {
			next = append(next, id)
		}
	}
	for _, id := range a.slaveIDs() {
		s := a.slaves[id]
		target := a.store.MaxOffset
		if id == a.candidate {
			target = a.candidateUntil
		}
		if !slices.Contains(next, id) && !slices.Contains(a.info.Set, id) && s.connected && s.acked >= target {
			next = append(next, id)
		}
	}
	slices.Sort(next)
	if slices.Equal(next, a.info.Set) {
		return nil
	}
	return next
}

// evaluate recomputes what the broker may do now and when to look again.
func (a *Agent) evaluate(now time.Time) {
	leaseEnd := a.lastOK.Add(a.cfg.Lease)
	w := a.isMaster() && (a.cfg.NoLease || now.Before(leaseEnd))
	if w != a.writable {
		a.writable = w
		a.rd.Writable = &w
	}
	end := time.Time{}
	if w && !a.cfg.NoLease {
		end = leaseEnd
	}
	if !end.Equal(a.leaseEnd) {
		a.leaseEnd = end
		a.rd.LeaseEnd = &end
	}
	acks := a.acks()
	if !slices.Equal(acks, a.ackSet) {
		a.ackSet = acks
		c := slices.Clone(acks)
		a.rd.AckSet = &c
	}
	var d time.Time
	earliest := func(t time.Time) { // what is due now was done above
		if t.After(now) && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	for k := Kind(0); k < kinds; k++ {
		if f := a.inflight[k]; f != nil {
			earliest(f.deadline)
		} else {
			earliest(a.due[k])
		}
	}
	if w && !a.cfg.NoLease {
		earliest(leaseEnd)
	}
	if a.isMaster() {
		if a.candidate != 0 {
			earliest(a.candidateSince.Add(a.cfg.SlaveNotCatchup))
		}
		for _, id := range a.info.Set {
			if s := a.slaves[id]; s != nil && !s.behindSince.IsZero() {
				earliest(s.behindSince.Add(a.cfg.SlaveNotCatchup))
			}
		}
	}
	a.rd.Deadline = d
}

// acks is the set of slaves a SYNC send waits for: the current set's, the
// proposed set's while a change is in flight, and a slave being waited for.
// A broker that is not (or no longer) the master keeps the last one: an
// empty set would acknowledge the sends still waiting, and move the
// confirm offset to the log's end, in the instant before the demotion is
// carried out (the simulator's seeds 1043 and 2044 of ctl-master-partition).
// Its sends then wait for slaves that no longer follow it, and time out.
func (a *Agent) acks() []int64 {
	if !a.isMaster() {
		return a.ackSet
	}
	var out []int64
	add := func(ids []int64) {
		for _, id := range ids {
			if id != a.brokerID && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	add(a.info.Set)
	add(a.proposed)
	if a.candidate != 0 {
		add([]int64{a.candidate})
	}
	slices.Sort(out)
	return out
}
