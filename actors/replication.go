package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
)

// The writer actor's part of replication: a slave's ha.Follower (the
// writer appends the master's bytes: it is the log's one appender in every
// role), the progress a master's replicator actor reports for the gate,
// and the handler of the replication connections.

// haIn is one read burst from a replication peer.
type haIn struct {
	conn Conn
	reqs []protocol.Request
}

// haGone reports a closed replication connection.
type haGone struct{ conn Conn }

// haTick drives heartbeats, housekeeping and metadata sync.
type haTick struct{}

// haDialed reports the outcome of connecting to the master.
type haDialed struct {
	conn Conn
	err  error
	gen  int // the follower it was dialled for
}

// haReconnect retries the link.
type haReconnect struct{ gen int }

// haHandler is the Handler of the replication port (to the replicator
// actor) and of a slave's link to its master (to the writer): it decodes
// frames and hands them to their owner.
type haHandler struct {
	k      *kit
	limits protocol.Limits
	writer func() *actor.PID // the owner
}

func (h *haHandler) Deliver(in *Inbound) {
	reqs := make([]protocol.Request, 0, len(in.Frames))
	for _, f := range in.Frames {
		req, err := protocol.DecodeRequest(f, h.limits)
		if err != nil {
			in.Conn.Close("replication link: " + err.Error())
			return
		}
		reqs = append(reqs, req)
	}
	h.k.send(h.writer(), &haIn{conn: in.Conn, reqs: reqs})
}

func (h *haHandler) Disconnected(c Conn) { h.k.send(h.writer(), &haGone{conn: c}) }

// replication handles the writer's replication messages.
func (a *writerActor) replication(ctx actor.Context, msg any) {
	now := a.k.now()
	switch m := msg.(type) {
	case *haIn:
		a.haIn(ctx, now, m)
	case *haGone:
		if a.fol != nil && m.conn == a.link {
			a.link = nil
			a.fol.Gone(m.conn.ID())
			a.drainFollower(ctx)
		}

	case *haDialed:
		a.dialed(ctx, now, m)
	case *haReconnect:
		if a.fol != nil && m.gen == a.role.gen {
			a.fol.Reconnect(now)
			a.drainFollower(ctx)
		}
	case *haTick:
		a.haTick(ctx, now)
		a.k.after(a.cfg.HASendHeartbeatInterval, a.self, &haTick{})
	case *slaveFlushed:
		if a.fol != nil {
			a.fol.Flushed()
			a.drainFollower(ctx)
		}
	case *metaSnapshot:
		if a.link != nil {
			a.link.Send(&protocol.HAMetadataRequest{Kind: m.kind, Data: m.data})
		}
	}
}

// haIn handles what the master sends on a slave's link.
func (a *writerActor) haIn(ctx actor.Context, now time.Time, m *haIn) {
	if a.fol == nil || m.conn != a.link {
		m.conn.Close("not this broker's link to its master")
		return
	}
	a.fol.Receive(now, m.conn.ID(), m.reqs)
	a.drainFollower(ctx)
}

func (a *writerActor) haTick(ctx actor.Context, now time.Time) {
	if a.fol != nil {
		a.fol.Tick(now)
		a.drainFollower(ctx)
	}
	a.slaveHolds(ctx) // again: a restarted Reput actor waits for it
}

// slaveHolds lifts the Reput actor's limit on a slave (controller mode) to
// its master's confirm offset as this broker last heard it, within its
// log: a slave's consumers see only what every replica an election may
// pick holds, since a slave's tail past it can be cut when another member
// is elected (and a former master's tail past its own last confirm offset
// is cut when it rejoins). Until a confirm offset is heard the limit stays
// where it started (what the store dispatched when it opened). A slave
// made master serves at once what it holds: its log is the new epoch's
// truth (durability.go lifts the limit to the epoch's start). The writer
// sends the limit, not the durability actor, because it is the log's
// appender: the end it reads has none of its own writes as a master, and
// the limit reaches the Reput actor before any of them does (one mailbox,
// FIFO).
func (a *writerActor) slaveHolds(ctx actor.Context) {
	if !a.cfg.EnableControllerMode || !a.role.slave() || a.fol == nil {
		return
	}
	c := a.fol.ConfirmOffset()
	if c <= 0 {
		return
	}
	a.v.publishConfirm(c)
	a.caughtUp()
	ctx.Send(a.p.reput, &confirmMoved{offset: c})
}

// drainFollower carries out what the follower asks for.
func (a *writerActor) drainFollower(ctx actor.Context) {
	rd := a.fol.Ready()
	if a.link != nil {
		for _, req := range rd.Sends {
			a.link.Send(req)
		}
		if rd.Close != "" {
			a.link.Close(rd.Close)
		}
	}
	for _, im := range rd.Imports {
		switch im.Kind {
		case "topics":
			ctx.Send(a.p.topics, &importMeta{kind: im.Kind, data: im.Data})
		case "offsets":
			ctx.Send(a.p.offsets, &importMeta{kind: im.Kind, data: im.Data})
		case deletedKind:
			a.importDeleted(ctx, im.Data)
		}
	}
	if rd.ExportOffsets {
		ctx.Request(a.p.offsets, &exportOffsets{}) // the reverse path: offsets committed here
	}
	if rd.Appended {
		a.slaveHolds(ctx)
		a.appended(ctx)
	}
	if rd.Truncate {
		a.fol.Truncated(a.k.now(), a.truncateLog(rd.TruncateTo))
		defer a.drainFollower(ctx)
	}
	if rd.RetryIn > 0 {
		a.k.after(rd.RetryIn, a.self, &haReconnect{gen: a.role.gen})
	}
	if rd.Dial {
		a.connect(rd.DialAddr)
	}
	a.v.publishFollower(a.fol.Status(), a.fol.MasterMaxOffset())
}

// truncateLog has a slave's log cut back to the point it shares with its
// master. storage.Store.TruncateTo needs the store to itself, and the
// reput, dispatch and index actors use it beside the writer, so the cut is
// recorded for the next start (storage.Store.RequestTruncate, done by
// Open before any actor runs) and replication stops until then: the log is
// never overwritten, and never copied onto while it diverges.
func (a *writerActor) truncateLog(off int64) error {
	end := a.st.CommitLog().MaxOffset()
	if err := a.st.RequestTruncate(off); err != nil {
		return fmt.Errorf("recording the cut of the log (end %d) back to %d: %w", end, off, err)
	}
	if a.restart != nil {
		why := fmt.Sprintf("the log (end %d) must be cut back to %d, the point it shares with the master; the cut is recorded, and the broker restarts on its store now to make it", end, off)
		a.k.log.Warn("restarting the broker on its store to cut its log", "end", end, "to", off)
		a.restart(why)
		return errors.New(why)
	}
	return fmt.Errorf("the log (end %d) must be cut back to %d, the point it shares with the master: the cut is recorded and done when the broker next starts; restart it", end, off)
}

// connect dials the master off the actor.
func (a *writerActor) connect(addr string) {
	if a.dialer == nil {
		return
	}
	dial, gen, k := a.dialer, a.role.gen, a.k
	self := a.self
	h := &haHandler{k: k, limits: a.limits, writer: func() *actor.PID { return self }}
	k.io(self, func() any {
		c, err := dial(addr, h)
		return &haDialed{conn: c, err: err, gen: gen}
	})
}

func (a *writerActor) dialed(ctx actor.Context, now time.Time, m *haDialed) {
	if a.fol == nil || m.gen != a.role.gen {
		if m.conn != nil {
			m.conn.Close("the broker's role changed while dialling")
		}
		return
	}
	if m.err == nil && closed(m.conn) {
		// A link can close before the writer hears it opened (a master
		// killed as it accepts): its haGone came first, for a link the
		// writer did not know yet, and was dropped; no other will come.
		// A transport closes a link before it reports it gone, so the
		// link says so itself (as the controller's links do).
		m.err = errors.New("the link to the master closed as it opened")
	}
	var id uint64
	if m.err == nil {
		a.link, id = m.conn, m.conn.ID()
	}
	a.fol.Dialed(now, id, m.err)
	a.drainFollower(ctx)
}
