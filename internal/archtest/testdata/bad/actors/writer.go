package actors

import (
	"os" // want seams: import "os": actors/ and storage/ reach disks and sockets
	clock "time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/go-cmp/cmp" // want imports: imports github.com/google/go-cmp/cmp: not in the allowlist of actors/
	"github.com/panjf2000/gnet/v2" // want imports: imports github.com/panjf2000/gnet/v2: not in the allowlist of actors/
	"github.com/wharfmq/wharf/actors/gate"
	"github.com/wharfmq/wharf/cmd/wharf" // want imports: imports github.com/wharfmq/wharf/cmd/wharf: nothing outside cmd/ imports cmd/
	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/netio" // want imports: imports github.com/wharfmq/wharf/netio: not in the allowlist of actors/
	"go.etcd.io/raft/v3/raftpb"
)

// write breaks every seam once, through a renamed import of package time.
func write(ctx actor.Context, pid *actor.PID) {
	start := clock.Now()           // want seams: time.Now: time is an input
	d := clock.Duration(3)         // a duration is a value: fine
	sleep := clock.Sleep           // want seams: time.Sleep: time is an input
	go sleep(d)                    // want seams: go statement: actors/ and storage/ start no goroutines
	ctx.RequestFuture(pid, nil, d) // want seams: RequestFuture: an actor never blocks
	_ = start.Add(d)               // a method of time.Time: fine
	os.Exit(1)
	_, _, _, _, _, _ = cmp.Diff, gnet.Run, gate.New, wharf.Main, netio.Serve, invariant.Check
	_ = raftpb.Entry{}
}
