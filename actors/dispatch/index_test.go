package dispatch

import (
	"errors"
	"testing"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

func TestIndexFlushCadence(t *testing.T) {
	x := NewIndex()
	// Nothing flushed yet: the first barrier flushes.
	if skip, _ := x.Barrier(false); skip {
		t.Fatal("first barrier skipped the flush")
	}
	x.Flushed(100)
	for i := 1; i < IndexFlushEvery; i++ {
		skip, indexed := x.Barrier(false)
		if !skip || indexed != 100 {
			t.Fatalf("barrier %d: skip %v indexed %d", i, skip, indexed)
		}
	}
	if skip, _ := x.Barrier(false); skip {
		t.Fatalf("barrier %d did not flush", IndexFlushEvery)
	}
	x.Flushed(200)
	if skip, indexed := x.Barrier(false); !skip || indexed != 200 {
		t.Fatalf("after a flush: skip %v indexed %d", skip, indexed)
	}
	// A flush still running is not skipped over: the shell reports it.
	if skip, _ := x.Barrier(true); skip {
		t.Fatal("skipped while a flush runs")
	}
}

type fakeQuery struct {
	recs    []storage.Record
	err     error
	gone    map[int64]bool // offsets deleted since the query
	gotMax  int
	gotEnd  int64
	gotTopc string
}

func (f *fakeQuery) QueryByKey(topic, key string, begin, end int64, max int) ([]storage.Record, error) {
	f.gotTopc, f.gotEnd, f.gotMax = topic, end, max
	return f.recs, f.err
}

func (f *fakeQuery) Read(off int64, n int) ([]byte, error) {
	if f.gone[off] {
		return nil, errors.New("deleted")
	}
	return make([]byte, n), nil
}

func TestQuery(t *testing.T) {
	recs := func(sizes ...int32) []storage.Record {
		var out []storage.Record
		for i, s := range sizes {
			out = append(out, storage.Record{PhysicalOffset: int64(i) * 1000, TotalSize: s})
		}
		return out
	}
	tests := []struct {
		name     string
		src      fakeQuery
		req      protocol.QueryMessageRequest
		maxBytes int
		want     protocol.Status
		wantN    int
		wantMax  int
		wantEnd  int64
	}{
		{"found", fakeQuery{recs: recs(10, 10)}, protocol.QueryMessageRequest{MaxNum: 5, EndTimestamp: 7}, 100, protocol.StatusOK, 2, 5, 7},
		{"maxNum 0 takes the cap", fakeQuery{recs: recs(10)}, protocol.QueryMessageRequest{}, 100, protocol.StatusOK, 1, QueryMaxNum, 5000 + 1000},
		{"maxNum above the cap", fakeQuery{recs: recs(10)}, protocol.QueryMessageRequest{MaxNum: 1000, EndTimestamp: -1}, 100, protocol.StatusOK, 1, QueryMaxNum, 6000},
		{"byte budget", fakeQuery{recs: recs(40, 40, 40)}, protocol.QueryMessageRequest{EndTimestamp: 9}, 80, protocol.StatusOK, 2, QueryMaxNum, 9},
		{"the first whatever its size", fakeQuery{recs: recs(400, 40)}, protocol.QueryMessageRequest{EndTimestamp: 9}, 80, protocol.StatusOK, 1, QueryMaxNum, 9},
		{"deleted since the query", fakeQuery{recs: recs(10, 10, 10), gone: map[int64]bool{1000: true}}, protocol.QueryMessageRequest{EndTimestamp: 9}, 100, protocol.StatusOK, 2, QueryMaxNum, 9},
		{"none", fakeQuery{}, protocol.QueryMessageRequest{EndTimestamp: 9}, 100, protocol.StatusQueryNotFound, 0, QueryMaxNum, 9},
		{"index error", fakeQuery{err: errors.New("messageIndexEnable is false")}, protocol.QueryMessageRequest{EndTimestamp: 9}, 100, protocol.StatusSystemError, 0, QueryMaxNum, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Topic, tt.req.Key = "t", "k"
			st, remark, raws := Query(&tt.src, &tt.req, 5000, tt.maxBytes)
			if st != tt.want || len(raws) != tt.wantN {
				t.Fatalf("%v (%s) with %d records, want %v with %d", st, remark, len(raws), tt.want, tt.wantN)
			}
			if tt.src.gotMax != tt.wantMax || tt.src.gotEnd != tt.wantEnd || tt.src.gotTopc != "t" {
				t.Fatalf("asked the index for %d up to %d in %q, want %d up to %d", tt.src.gotMax, tt.src.gotEnd, tt.src.gotTopc, tt.wantMax, tt.wantEnd)
			}
		})
	}
}

func TestFlush(t *testing.T) {
	var f Flush
	if f.Hold(10) {
		t.Fatal("retention held with no flush running")
	}
	f.Start()
	if !f.Running() || !f.Hold(10) || !f.Hold(30) || !f.Hold(20) {
		t.Fatal("retention not held during a flush")
	}
	if minPhy, ok := f.Finish(); !ok || minPhy != 30 {
		t.Fatalf("deferred retention %d %v, want the latest start 30", minPhy, ok)
	}
	f.Start()
	if minPhy, ok := f.Finish(); ok {
		t.Fatalf("a flush without retention returned %d", minPhy)
	}
	f.Start()
	f.Hold(0) // the log's start at 0 is a start too
	if _, ok := f.Finish(); !ok || f.Running() {
		t.Fatal("retention to 0 lost")
	}
}
