package actors

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
)

// kit is what every actor shell is handed instead of the Broker: how to
// answer a request, arm a timer, run blocking I/O off the actor, log, and
// which faults are planted. A shell holds a *kit, the narrow dependencies of
// its core (the store, its part of the Config) and the *pids of the actors
// it talks to; never the Broker.
type kit struct {
	root  *actor.RootContext
	clock Clock
	runIO func(func())
	// lane runs background disk jobs one at a time (iolane.go); nil: they
	// run as io does.
	lane   *ioLane
	log    *slog.Logger
	faults Faults
	// metrics is never nil (the no-op by default); timed says it wants
	// latencies, so requests carry their arrival time.
	metrics Metrics
	timed   bool
}

// pids are the addresses of the broker's top-level actors, filled in by
// Start before any message flows (the role supervisor fills replicator and
// scheduler when it starts them).
type pids struct {
	role, writer, durability, reput, index, topics, offsets, groups, scheduler *actor.PID
	registrar                                                                  *actor.PID // nil: no name server
	ctl                                                                        *actor.PID // nil: not in controller mode
	snapshot                                                                   *actor.PID // nil: metrics off
}

func (k *kit) now() time.Time { return k.clock.Now() }

// after sends msg to pid after d on the Clock seam.
func (k *kit) after(d time.Duration, pid *actor.PID, msg any) func() bool {
	return k.clock.AfterFunc(d, func() { k.root.Send(pid, msg) })
}

// io runs job off the actor (Env.RunIO) and sends what it returns to self.
func (k *kit) io(self *actor.PID, job func() any) {
	root := k.root
	k.runIO(func() { root.Send(self, job()) })
}

// background runs job like io, but on the broker's one lane of background
// disk work (iolane.go): after every background job handed in before it.
func (k *kit) background(self *actor.PID, job func() any) {
	if k.lane == nil {
		k.io(self, job)
		return
	}
	root := k.root
	k.lane.submit(func() { root.Send(self, job()) })
}

// send delivers msg to pid from outside an actor context.
func (k *kit) send(pid *actor.PID, msg any) { k.root.Send(pid, msg) }

// respond answers r with a typed response, unless the request was oneway;
// the connection's codec encodes it.
// The answer is handed to the connection before its latency is observed:
// the connection's event loop may write it meanwhile.
func (k *kit) respond(r *request, st protocol.Status, remark string, resp protocol.Fields) {
	defer k.observe(r, st)
	k.reply(r, st, remark, resp)
}

// respondAt is respond for a run of answers that share one clock read: now,
// read once after the work they answer (a writer's batch, a gate's
// release), is their end for the latency metric. A clock read per answer
// was 2 % of the broker's CPU with one SEND per message.
func (k *kit) respondAt(now time.Time, r *request, st protocol.Status, remark string, resp protocol.Fields) {
	k.reply(r, st, remark, resp)
	k.observeAt(now, r, st)
}

// reply hands r's answer to its connection, unless the request was oneway.
func (k *kit) reply(r *request, st protocol.Status, remark string, resp protocol.Fields) {
	if r == nil || r.oneway || r.conn == nil {
		return
	}
	r.conn.Reply(Response{Code: r.code, Opaque: r.opaque, Status: st, Remark: remark, Fields: resp})
}

// respondRecords answers r with log records as read (a pull), encoded by the
// connection's codec.
func (k *kit) respondRecords(r *request, st protocol.Status, remark string, recs *Records) {
	defer k.observe(r, st)
	if r == nil || r.oneway || r.conn == nil {
		return
	}
	r.conn.Reply(Response{Code: r.code, Opaque: r.opaque, Status: st, Remark: remark, Records: recs})
}

// observe reports an answered request's latency to the metrics seam;
// requests stamped with no arrival time (metrics off, internal ones) are
// not timed.
func (k *kit) observe(r *request, st protocol.Status) {
	if !k.timed || r == nil || r.at.IsZero() {
		return
	}
	k.metrics.Request(r.code, st, k.now().Sub(r.at))
}

// observeAt is observe with the answer's time given.
func (k *kit) observeAt(now time.Time, r *request, st protocol.Status) {
	if !k.timed || r == nil || r.at.IsZero() {
		return
	}
	k.metrics.Request(r.code, st, now.Sub(r.at))
}
