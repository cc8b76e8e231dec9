package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/actors/dispatch"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// queryMsg is a QUERY_MESSAGE request.
type queryMsg struct {
	*request
	req *protocol.QueryMessageRequest
}

// indexActor is the shell of the index (dispatch.Index and dispatch.Query):
// it owns the IndexFile, indexes new records, answers queries by key and
// flushes the index every dispatch.IndexFlushEvery checkpoints.
type indexActor struct {
	k        *kit
	store    *storage.Store
	maxBytes int // cap on the record bytes of an answer (MaxPullBytes)
	core     *dispatch.Index
	flush    dispatch.Flush
}

func newIndexActor(k *kit, store *storage.Store, maxBytes int) *indexActor {
	return &indexActor{k: k, store: store, maxBytes: maxBytes, core: dispatch.NewIndex()}
}

func (x *indexActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *indexEntries:
		for i := range m.reqs {
			if err := x.store.ApplyIndex(&m.reqs[i]); err != nil {
				x.k.log.Error("index write failed", "err", err)
				break
			}
		}
	case *queryMsg:
		x.query(m)
	case *flushBarrier:
		x.flushBarrier(ctx, m)
	case *ownerFlushed:
		if m.ack.Err != nil {
			x.store.FailIndexFlush(m.ack.Err)
		} else {
			x.core.Flushed(m.ack.Indexed)
		}
		ctx.Send(m.replyTo, &barrierAck{m.ack})
		if minPhy, ok := x.flush.Finish(); ok {
			x.deleteBefore(minPhy)
		}
	case *deleteBefore:
		if !x.flush.Hold(m.minPhy) {
			x.deleteBefore(m.minPhy)
		}
	}
}

// flushBarrier answers a checkpoint barrier: with the extent of the last
// flush, or after flushing the index off the actor.
func (x *indexActor) flushBarrier(ctx actor.Context, m *flushBarrier) {
	if skip, indexed := x.core.Barrier(x.flush.Running()); skip {
		ctx.Respond(&barrierAck{dispatch.Ack{ID: m.id, Indexed: indexed, IsIndex: true}})
		return
	}
	indexed, job, err := x.store.FlushIndexJob()
	if err == nil && job == nil {
		x.core.Flushed(indexed) // nothing unflushed: durable as it is
	}
	if err != nil || job == nil || x.flush.Running() {
		if err == nil && job != nil {
			err = errors.New("index: a flush is still running")
			x.store.FailIndexFlush(err)
		}
		ctx.Respond(&barrierAck{dispatch.Ack{ID: m.id, Indexed: indexed, IsIndex: true, Err: err}})
		return
	}
	runFlush(x.k, ctx.Self(), &x.flush, job, &ownerFlushed{ack: dispatch.Ack{ID: m.id, Indexed: indexed, IsIndex: true}, replyTo: ctx.Sender()})
}

func (x *indexActor) deleteBefore(minPhy int64) {
	if _, err := x.store.DeleteIndexBefore(minPhy); err != nil {
		x.k.log.Error("retention of index failed", "err", err)
	}
}

func (x *indexActor) query(m *queryMsg) {
	if m.conn != nil && closed(m.conn) {
		return
	}
	st, remark, raws := dispatch.Query(querySource{x.store}, m.req, x.k.now().UnixMilli(), x.maxBytes)
	if st != protocol.StatusOK {
		x.k.respond(m.request, st, remark, nil)
		return
	}
	x.k.respondRecords(m.request, st, "", &Records{Kind: RecordsQuery, Raw: raws})
}

// querySource reads queries from the store and its log.
type querySource struct{ *storage.Store }

func (s querySource) Read(off int64, n int) ([]byte, error) { return s.CommitLog().Read(off, n) }
