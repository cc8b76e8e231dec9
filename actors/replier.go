package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/gate"
	"github.com/wharfmq/wharf/protocol"
)

// The replier actor writes answers the gate released in bulk: a group
// commit releases every send its fsync covered, a slave's report every
// SYNC_MASTER send it acknowledged. Encoding them and the socket writes
// they cost (one each, for sync clients) would otherwise hold up the
// writer's next append; here they take the other core. A few answers are
// cheaper written where they are released than handed over.
const inlineAnswers = 2

// answers is a batch of released sends, for the replier.
type answers struct{ items []answer }

type answer struct {
	req *request
	ok  protocol.Fields // the answer if the verdict is OK
	v   gate.Verdict
}

type replier struct{ k *kit }

func (r *replier) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*answers); ok {
		for _, a := range m.items {
			if a.v.Status == protocol.StatusOK {
				r.k.respond(a.req, protocol.StatusOK, "", a.ok)
			} else {
				r.k.respond(a.req, a.v.Status, a.v.Remark, nil)
			}
		}
	}
}
