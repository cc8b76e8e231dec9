package ctlagent

import (
	"slices"
	"time"
)

// Tick times out requests, sends those due, and re-evaluates the lease.
func (a *Agent) Tick(now time.Time, st StoreState) {
	a.now = now
	if !a.started {
		return
	}
	a.store = st
	for k := Kind(0); k < kinds; k++ {
		if f := a.inflight[k]; f != nil && !now.Before(f.deadline) {
			a.failed(now, k)
		}
	}
	a.step(now)
}

// step sends the requests due and re-evaluates: the end of every input.
func (a *Agent) step(now time.Time) {
	if a.brokerID != 0 {
		for _, k := range []Kind{Heartbeat, GetInfo} {
			if a.due[k].IsZero() {
				a.due[k] = now
			}
		}
	}
	a.track(now)
	if a.isMaster() && a.inflight[AlterSet] == nil && a.due[AlterSet].IsZero() && a.alterTo() != nil {
		// A member fell behind for too long, or caught up. Not when a
		// retry is scheduled already: a failed or refused change waits
		// its delay (every slave report is an input, and without the
		// check a master whose controllers are down dialled them
		// thousands of times a second).
		a.due[AlterSet] = now
	}
	for k := Kind(0); k < kinds; k++ {
		if a.inflight[k] == nil && !a.due[k].IsZero() && !now.Before(a.due[k]) {
			a.send(now, k)
		}
	}
	a.evaluate(now)
}

// send puts request k on the wire to the controller believed to lead.
func (a *Agent) send(now time.Time, k Kind) {
	if k == AlterSet && a.alterTo() == nil {
		a.due[AlterSet] = time.Time{}
		return
	}
	a.nextID++
	req := Request{ID: a.nextID, To: a.cfg.Controllers[a.cur], Kind: k, BrokerID: a.brokerID,
		Epoch: a.store.Epoch, MaxOffset: a.store.MaxOffset, ConfirmOffset: a.store.ConfirmOffset, MayLackAcked: a.store.MayLackAcked}
	f := &flight{id: req.ID, sentAt: now, deadline: now.Add(a.cfg.RequestTimeout)}
	if k == AlterSet {
		req.MasterEpoch, req.SetEpoch = a.info.MasterEpoch, a.info.SetEpoch
		f.newSet = a.alterTo()
		req.NewSet = slices.Clone(f.newSet)
		if a.proposed == nil || a.proposedBase != a.info.SetEpoch {
			a.proposed, a.proposedBase = nil, a.info.SetEpoch
		}
		for _, id := range f.newSet {
			if !slices.Contains(a.proposed, id) {
				a.proposed = append(a.proposed, id)
			}
		}
	}
	a.inflight[k] = f
	a.due[k] = time.Time{}
	a.rd.Requests = append(a.rd.Requests, req)
}

// find returns the kind of the request in flight with id.
func (a *Agent) find(id uint64) (Kind, *flight) {
	for k := Kind(0); k < kinds; k++ {
		if f := a.inflight[k]; f != nil && f.id == id {
			return k, f
		}
	}
	return kinds, nil
}

// Answer is the controller's answer to a request.
func (a *Agent) Answer(now time.Time, ans Answer) {
	a.now = now
	k, f := a.find(ans.ID)
	if f == nil {
		return // timed out already, or a duplicate
	}
	a.inflight[k] = nil
	switch ans.Status {
	case NotLeader:
		a.moveTo(ans.Leader)
		a.due[k] = now // at once, to the leader
		a.step(now)
		return
	case Fenced:
		a.due[GetInfo] = now // the set or the epoch moved on: learn them
	case Refused:
		a.due[k] = now.Add(a.cfg.HeartbeatInterval)
	case Unregistered:
		// The controllers lost this broker (their state was rebuilt):
		// register again; the broker may get another id, so nothing
		// that names the old one stands meanwhile.
		a.brokerID = 0
		for _, q := range []Kind{Heartbeat, GetInfo, AlterSet} {
			a.inflight[q], a.due[q] = nil, time.Time{}
		}
		if a.inflight[Register] == nil {
			a.due[Register] = now
		}
	case OK:
		a.answered(now, k, f, ans)
	}
	a.step(now)
}

func (a *Agent) answered(now time.Time, k Kind, f *flight, ans Answer) {
	switch k {
	case Register:
		if ans.BrokerID <= 0 {
			a.due[k] = now.Add(a.cfg.HeartbeatInterval)
			return
		}
		a.brokerID = ans.BrokerID
		a.due[Heartbeat], a.due[GetInfo] = now, now
	case Heartbeat:
		a.due[k] = f.sentAt.Add(a.cfg.HeartbeatInterval)
		if a.haveInfo && ans.MasterEpoch > a.info.MasterEpoch {
			// The group moved on to an epoch this broker has not heard of
			// (its notification lost): the answer confirms nothing this
			// broker holds, so it renews no lease. Learn the new epoch.
			a.due[GetInfo] = now
			return
		}
		if f.sentAt.After(a.lastOK) {
			a.lastOK = f.sentAt
		}
	case GetInfo:
		a.due[k] = f.sentAt.Add(a.cfg.HeartbeatInterval)
	case AlterSet:
		if ans.Info == nil { // answered without the new set: read it
			a.due[GetInfo] = now
		}
	}
	if ans.Info != nil {
		a.learn(now, *ans.Info)
	}
}

// Failed reports that request id got no answer (a broken connection, a
// timeout the shell noticed first).
func (a *Agent) Failed(now time.Time, id uint64) {
	a.now = now
	if k, f := a.find(id); f != nil {
		a.failed(now, k)
		a.step(now)
	}
}

func (a *Agent) failed(now time.Time, k Kind) {
	a.inflight[k] = nil
	a.cur = (a.cur + 1) % len(a.cfg.Controllers)
	a.due[k] = now.Add(DefaultRetryDelay)
}

func (a *Agent) moveTo(leader string) {
	if i := slices.Index(a.cfg.Controllers, leader); i >= 0 {
		a.cur = i
		return
	}
	a.cur = (a.cur + 1) % len(a.cfg.Controllers)
}

// Notified is a role change the controller pushed: read the info at once
// (the notification itself may be stale or reordered).
func (a *Agent) Notified(now time.Time) {
	a.now = now
	if a.brokerID != 0 && a.inflight[GetInfo] == nil {
		a.due[GetInfo] = now
		a.send(now, GetInfo)
	}
	a.step(now)
}

// learn takes replica info newer than what is known, and the role it
// implies.
func (a *Agent) learn(now time.Time, inf Info) {
	if a.haveInfo && (inf.MasterEpoch < a.info.MasterEpoch ||
		inf.MasterEpoch == a.info.MasterEpoch && inf.SetEpoch < a.info.SetEpoch) {
		return
	}
	if a.haveInfo && inf.MasterEpoch != a.info.MasterEpoch {
		a.candidate = 0 // a new epoch: any wait for a slave is void
	}
	inf.Set = slices.Clone(inf.Set)
	slices.Sort(inf.Set)
	a.info, a.haveInfo = inf, true
	if inf.SetEpoch > a.proposedBase {
		a.proposed = nil // resolved: applied, or overtaken by another change
	}
	var want *Role
	switch {
	case inf.MasterID == 0 || a.brokerID == 0:
	case inf.MasterID == a.brokerID && a.store.MayLackAcked && !(inf.MasterMayLackAcked && a.store.Epoch < inf.MasterEpoch):
		// Its log may lack what it (or its set) acknowledged, and the
		// controllers did not elect it knowing that, or it began the
		// epoch and crashed again: another member may hold more. It
		// waits, a replica that follows nobody, for the controllers to
		// elect the best of the set again (its heartbeats say why),
		// itself perhaps, knowingly, in a newer epoch.
	case inf.MasterID == a.brokerID:
		want = &Role{Master: true, BrokerID: a.brokerID, Epoch: inf.MasterEpoch}
	default:
		want = &Role{MasterAddr: inf.MasterAddr, BrokerID: a.brokerID, Epoch: inf.MasterEpoch}
	}
	if want != nil && !sameRole(want, a.applied) && !sameRole(want, a.asked) {
		a.asked = want
		r := *want
		a.rd.Role = &r
	}
}

func sameRole(x, y *Role) bool { return x != nil && y != nil && *x == *y }

// RoleApplied reports that the broker carried out role r.
func (a *Agent) RoleApplied(now time.Time, r Role) {
	a.now = now
	a.applied = &r
	if sameRole(&r, a.asked) {
		a.asked = nil
	}
	if r.Master {
		a.slaves = map[int64]*slave{}
		a.candidate, a.proposed = 0, nil
	}
	a.step(now)
}

// Slaves is the master's view of its slaves' progress.
func (a *Agent) Slaves(now time.Time, ps []SlaveProgress) {
	a.now = now
	seen := map[int64]bool{}
	for _, p := range ps {
		seen[p.BrokerID] = true
		s := a.slaves[p.BrokerID]
		if s == nil {
			s = &slave{}
			a.slaves[p.BrokerID] = s
		}
		s.acked, s.connected = p.Acked, p.Connected
		switch {
		case p.Acked >= a.store.MaxOffset:
			s.behindSince = time.Time{}
		case s.behindSince.IsZero():
			s.behindSince = now
		}
	}
	for id, s := range a.slaves {
		if !seen[id] {
			s.connected = false
		}
	}
	a.step(now) // proposes the change a report calls for (see step)
}
