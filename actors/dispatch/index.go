package dispatch

import (
	"fmt"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// IndexFlushEvery is how many checkpoints (flushIntervalConsumeQueue
// apart) pass between flushes of the index. The checkpoints between record
// the extent of the last flush, so a crash re-indexes at most that many
// checkpoint intervals of records. The index's slots are spread over the
// whole file: flushing them every second wrote hundreds of random pages
// and doubled the broker's tail latency.
const IndexFlushEvery = 10

// Index is the IndexActor's flush cadence.
type Index struct {
	barriers int   // checkpoints since the last flush
	flushed  int64 // extent of the last successful flush; -1: none yet
}

// NewIndex returns an index that has not flushed yet.
func NewIndex() *Index { return &Index{flushed: -1} }

// Barrier is called for each checkpoint barrier. skip true: answer with
// indexed, the extent of the last flush, without flushing; false: flush now
// (the counter restarts). running says whether a flush is still under way
// (then the barrier flushes, and the shell reports the overlap).
func (x *Index) Barrier(running bool) (skip bool, indexed int64) {
	if x.barriers++; x.flushed >= 0 && x.barriers < IndexFlushEvery && !running {
		return true, x.flushed
	}
	x.barriers = 0
	return false, 0
}

// Flushed: the index is durable up to indexed (a flush finished, or there
// was nothing to flush).
func (x *Index) Flushed(indexed int64) { x.flushed = indexed }

// QueryMaxNum caps a QUERY_MESSAGE's maxNum (RocketMQ's maxMsgsNumBatch);
// 0 or less asks for this many.
const QueryMaxNum = 64

// QuerySource is what a query by key reads.
type QuerySource interface {
	QueryByKey(topic, key string, beginMs, endMs int64, max int) ([]storage.Record, error)
	// Read returns the n bytes of the log at off.
	Read(off int64, n int) ([]byte, error)
}

// Query answers QUERY_MESSAGE: at most maxNum (capped at QueryMaxNum)
// records of the topic with the key, stored in [begin, end] (end 0 or less:
// up to a second after nowMs), newest first, whose sizes add up to at most
// maxBytes but for the first (the frame and outbound limits). It returns
// the status, a remark and the records as read.
func Query(src QuerySource, req *protocol.QueryMessageRequest, nowMs int64, maxBytes int) (protocol.Status, string, [][]byte) {
	max := int(req.MaxNum)
	if max <= 0 || max > QueryMaxNum {
		max = QueryMaxNum
	}
	end := req.EndTimestamp
	if end <= 0 {
		end = nowMs + 1000
	}
	recs, err := src.QueryByKey(req.Topic, req.Key, req.BeginTimestamp, end, max)
	if err != nil {
		return protocol.StatusSystemError, err.Error(), nil
	}
	if len(recs) == 0 {
		return protocol.StatusQueryNotFound, fmt.Sprintf("no message with key %q in topic %q", req.Key, req.Topic), nil
	}
	raws := make([][]byte, 0, len(recs))
	bytes := 0
	for i := range recs {
		if len(raws) > 0 && bytes+int(recs[i].TotalSize) > maxBytes {
			break
		}
		raw, err := src.Read(recs[i].PhysicalOffset, int(recs[i].TotalSize))
		if err != nil {
			continue // deleted by retention since the query
		}
		bytes += int(recs[i].TotalSize)
		raws = append(raws, raw)
	}
	return protocol.StatusOK, "", raws
}
