package register

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Tick runs what is due at now: dials, registrations, heartbeats, and the
// closing of links whose answers are late. Call it at Deadline (earlier is
// harmless).
func (r *Registrar) Tick(now time.Time) {
	if !r.started {
		return
	}
	for _, s := range r.servers {
		r.tickServer(s, now)
	}
	if r.stopping && !r.done && !now.Before(r.stopBy) {
		r.done = true
		r.rd.Done = true
	}
}

func (r *Registrar) tickServer(s *server, now time.Time) {
	switch s.state {
	case down:
		if !r.stopping && !now.Before(s.dialAt) {
			s.state = dialing
			r.rd.Dials = append(r.rd.Dials, s.addr)
		}
		return
	case dialing:
		return
	}
	for op, c := range s.calls {
		if !now.Before(c.deadline) {
			delete(s.calls, op)
			r.rd.Closes = append(r.rd.Closes, Close{Addr: s.addr, Link: s.link,
				Reason: fmt.Sprintf("name server %s did not answer within %v", s.addr, r.cfg.RequestTimeout)})
			r.down(s, now, false)
			r.tickServer(s, now) // the redial may be due at once
			return
		}
	}
	if r.stopping {
		return
	}
	if !now.Before(s.fullAt) {
		s.regAt = now
	}
	if !s.regAt.IsZero() && !now.Before(s.regAt) {
		r.register(s, now)
	}
	if !now.Before(s.beatAt) {
		s.beatAt = now.Add(r.cfg.HeartbeatInterval)
		switch {
		case !s.registered:
			// Not held there (a Stale answer, or a registration lost in
			// flight): the heartbeat's time is the registration's.
			if !r.inFlight(s, kindRegister) {
				r.register(s, now)
			}
		case !r.inFlight(s, kindHeartbeat):
			r.call(s, now, kindHeartbeat, &protocol.BrokerHeartbeatRequest{BrokerIdentity: r.id, DataVersion: r.version})
		}
	}
}

func (r *Registrar) register(s *server, now time.Time) {
	s.regAt = time.Time{}
	s.fullAt = now.Add(r.cfg.RegisterPeriod)
	r.call(s, now, kindRegister, &protocol.RegisterBrokerRequest{
		BrokerIdentity:         r.id,
		HAServerAddr:           r.cfg.HAServerAddr,
		RemotingAddr:           r.cfg.RemotingAddr,
		BrokerRole:             r.role,
		DataVersion:            r.version,
		HeartbeatTimeoutMillis: r.cfg.Lease.Milliseconds(),
		MasterEpoch:            r.epoch,
		Topics:                 r.topics,
	})
}

func (r *Registrar) call(s *server, now time.Time, k kind, req protocol.Request) {
	r.opaque++
	timeout := r.cfg.RequestTimeout
	if k == kindUnregister && r.stopping {
		timeout = r.cfg.StopTimeout
	}
	s.calls[r.opaque] = inflight{kind: k, version: r.version, id: r.id, deadline: now.Add(timeout)}
	r.rd.Calls = append(r.rd.Calls, Call{Addr: s.addr, Opaque: r.opaque, Req: req})
}

func (r *Registrar) inFlight(s *server, k kind) bool {
	for _, c := range s.calls {
		if c.kind == k {
			return true
		}
	}
	return false
}

// Answer reports the answer to the request sent as opaque to addr: its
// status and, for REGISTER_BROKER and BROKER_HEARTBEAT, its fields.
func (r *Registrar) Answer(now time.Time, addr string, opaque uint32, st protocol.Status, resp *protocol.RegisterBrokerResponse) {
	s := r.byAddr[addr]
	if s == nil || s.state != up {
		return
	}
	c, ok := s.calls[opaque]
	if !ok {
		return
	}
	delete(s.calls, opaque)
	s.backoff = 0 // it answers: the next loss redials at once
	if resp == nil {
		resp = &protocol.RegisterBrokerResponse{}
	}
	current := c.version == r.version && c.id == r.id
	switch {
	case c.kind == kindUnregister:
		r.checkDone()
		return
	case st != protocol.StatusOK:
		// Refused (a bad identity, say): try again on the heartbeat's
		// time rather than in a loop.
		s.registered = false
	case c.kind == kindRegister && resp.Stale:
		if current {
			s.registered = false
		}
	case c.kind == kindRegister:
		if current {
			s.registered = true
		}
	case resp.Unknown:
		if current && !r.inFlight(s, kindRegister) {
			s.registered = false
			s.regAt = now
		}
	}
	if resp.LeaseMillis > 0 {
		s.lease = time.Duration(resp.LeaseMillis) * time.Millisecond
	}
	r.Tick(now)
}

// Stop sends UNREGISTER_BROKER on every link that is up; Ready reports
// Done once each is answered, or StopTimeout passed.
func (r *Registrar) Stop(now time.Time) {
	if r.stopping {
		return
	}
	r.stopping, r.stopBy = true, now.Add(r.cfg.StopTimeout)
	for _, s := range r.servers {
		clear(s.calls)
		if s.state == up {
			r.call(s, now, kindUnregister, &protocol.UnregisterBrokerRequest{BrokerIdentity: r.id})
		}
	}
	r.checkDone()
}

// checkDone reports Done once stopping and nothing is in flight.
func (r *Registrar) checkDone() {
	if !r.stopping || r.done {
		return
	}
	for _, s := range r.servers {
		if len(s.calls) > 0 {
			return
		}
	}
	r.done, r.rd.Done = true, true
}

// Deadline is when Tick must next run (false: nothing is scheduled).
func (r *Registrar) Deadline() (time.Time, bool) {
	var d time.Time
	at := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	if r.stopping {
		if !r.done {
			at(r.stopBy)
		}
		return d, !d.IsZero()
	}
	for _, s := range r.servers {
		switch s.state {
		case down:
			at(s.dialAt)
		case up:
			at(s.regAt)
			at(s.beatAt)
			at(s.fullAt)
			for _, c := range s.calls {
				at(c.deadline)
			}
		}
	}
	return d, !d.IsZero()
}

// Ready returns what the caller must do and forgets it.
func (r *Registrar) Ready() Ready {
	rd := r.rd
	r.rd = Ready{}
	return rd
}

// Status is one name server's registration, for status displays.
type Status struct {
	Addr       string
	Up         bool
	Registered bool
	Lease      time.Duration // granted by the last answer
}

// Statuses returns every name server's state, in Config order.
func (r *Registrar) Statuses() []Status {
	out := make([]Status, 0, len(r.servers))
	for _, s := range r.servers {
		out = append(out, Status{Addr: s.addr, Up: s.state == up, Registered: s.registered, Lease: s.lease})
	}
	return out
}
