package sim

import (
	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/actors/raftnode"
)

// controllerConfig is controller node n's configuration: its raft id and
// peers, its log on the node's disk, the election seed from the
// simulator's, the scaled-down timing, and the hooks that feed the
// simulator's shadow of its State.
func (s *Sim) controllerConfig(n *Node) actors.ControllerConfig {
	cc := s.cfg.Ctl
	return actors.ControllerConfig{
		SelfID: uint64(n.ctl.idx + 1), Peers: s.ctlPeers(), FS: n.fs, Dir: "/ctl",
		TickInterval: cc.Tick, ElectionTimeout: cc.Election,
		Seed: uint64(s.res.Seed)<<8 | uint64(n.ctl.idx+1),
		Core: controller.Config{HeartbeatTimeout: cc.HeartbeatTimeout, RequestTimeout: 4 * cc.RequestTimeout,
			ScanInterval: cc.HeartbeatTimeout / 4},
		OnApplied: func(index uint64, cmd, _ []byte, _ uint64) { s.onApplied(n, index, cmd) },
		OnStatus:  func(st raftnode.Status) { s.onStatus(n, st) },
	}
}
