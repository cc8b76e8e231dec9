package actors

import (
	"encoding/json"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/ha"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// The replicator actor hosts a master's ha.Replicator: it owns the slaves'
// connections on the haListenPort, streams the log to them and tells the
// writer how far each has acknowledged (replProgress), which the writer's
// gate needs for SYNC_MASTER. It runs beside the writer rather than in it
// so that reading and sending the log's bytes to slaves, and their
// reports, take the other core, not the appender's time (sync-master-64
// lost a third of its throughput with both in one actor). On a slave it
// refuses whoever connects.

// replActive turns replication on (the broker became a master) or off
// (it became a slave: every slave connection is closed). From the writer.
type replActive struct {
	on     bool
	reason string
}

// replProgress is the slaves' acknowledged offsets and how many are in
// sync, for the writer's gate.
type replProgress struct {
	acked  []int64
	inSync int
}

type replicatorActor struct {
	k     *kit
	p     *pids
	v     *views
	st    *storage.Store
	cfg   Config
	self  *actor.PID
	repl  *ha.Replicator // nil while the broker is a slave
	peers map[uint64]Conn
}

func newReplicatorActor(k *kit, p *pids, v *views, st *storage.Store, cfg Config) *replicatorActor {
	return &replicatorActor{k: k, p: p, v: v, st: st, cfg: cfg}
}

func (a *replicatorActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.peers = ctx.Self(), map[uint64]Conn{}
		if !a.v.currentRole().slave() {
			a.activate()
		}
		a.k.after(a.cfg.HASendHeartbeatInterval, a.self, &haTick{})
	case *replActive:
		switch {
		case m.on && a.repl == nil:
			a.activate()
		case !m.on && a.repl != nil:
			a.repl.CloseAll(m.reason)
			a.drain(ctx)
			a.repl = nil
			a.v.publishSlaves(nil)
		}
	case *logAppended:
		if a.repl != nil {
			a.repl.Appended()
			a.drain(ctx)
		}
	case *haIn:
		a.in(ctx, m)
	case *haGone:
		delete(a.peers, m.conn.ID())
		if a.repl != nil {
			a.repl.Gone(m.conn.ID())
			a.drain(ctx)
		}
	case *haTick:
		if a.repl != nil {
			a.repl.Tick(a.k.now())
			a.drain(ctx)
		}
		a.k.after(a.cfg.HASendHeartbeatInterval, a.self, &haTick{})
	case *metaSnapshot:
		if a.repl != nil {
			a.repl.Broadcast(&protocol.HAMetadataRequest{Kind: m.kind, Data: m.data})
			a.drain(ctx)
		}
	case *actor.Stopping:
		for _, c := range a.peers {
			c.Close("broker stopping")
		}
	}
}

func (a *replicatorActor) activate() {
	a.repl = ha.NewReplicator(ha.ReplicatorConfig{MaxGapNotInSync: a.cfg.HAMaxGapNotInSync, TransferBatchSize: a.cfg.HATransferBatchSize,
		CatchUpFromLastSegment: a.cfg.HACatchUpFromLastSegment, HousekeepingInterval: a.cfg.HAHousekeepingInterval,
		MetadataInterval: a.cfg.HAMetadataInterval}, a.st.CommitLog(), a.k.log)
}

func (a *replicatorActor) in(ctx actor.Context, m *haIn) {
	if a.repl == nil {
		// A slave's replication port: nobody may replicate from it.
		m.conn.Send(&protocol.HARefuseRequest{Reason: fmt.Sprintf("broker %s is a slave; replicate from its master", a.cfg.BrokerName)})
		m.conn.Close("replication requested from a slave")
		return
	}
	a.peers[m.conn.ID()] = m.conn
	now := a.k.now()
	for _, req := range m.reqs {
		switch r := req.(type) {
		case *protocol.HAReportRequest:
			a.repl.Report(now, m.conn.ID(), m.conn.RemoteAddr(), r)
		case *protocol.HAMetadataRequest:
			if r.Kind == "offsets" { // a slave's consumer offsets: merged, never lost
				ctx.Send(a.p.offsets, &importMeta{kind: r.Kind, data: r.Data})
			}
		default:
			m.conn.Close(fmt.Sprintf("unexpected %v on the replication port", req.RequestCode()))
			return
		}
	}
	a.drain(ctx)
}

// drain carries out what the replicator asks for and tells the writer the
// slaves' progress.
func (a *replicatorActor) drain(ctx actor.Context) {
	rd := a.repl.Ready()
	for _, s := range rd.Sends {
		if c := a.peers[s.Peer]; c != nil {
			c.Send(s.Req)
		}
	}
	for _, c := range rd.Closes {
		if conn := a.peers[c.Peer]; conn != nil {
			conn.Close(c.Reason)
			delete(a.peers, c.Peer)
		}
	}
	if rd.Progress {
		acked, inSync := a.repl.Acked(nil)
		ctx.Send(a.p.writer, &replProgress{acked: acked, inSync: inSync})
		a.v.publishSlaves(a.repl.Slaves())
	}
	if rd.Metadata {
		if data, err := json.Marshal(a.v.topicsSnapshot()); err == nil {
			a.repl.Broadcast(&protocol.HAMetadataRequest{Kind: "topics", Data: data})
		}
		if data, ok := deletedMetadata(a.st); ok {
			a.repl.Broadcast(&protocol.HAMetadataRequest{Kind: deletedKind, Data: data})
		}
		ctx.Request(a.p.offsets, &exportOffsets{})
		a.drain(ctx)
	}
}
