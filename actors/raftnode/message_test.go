package raftnode

import (
	"bytes"
	"fmt"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

func sampleMessages() []*pb.Message {
	return []*pb.Message{
		{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(3)), Commit: new(uint64(9)),
			Context: []byte{0, 0, 0, 0, 0, 0, 0, 7}},
		{Type: pb.MsgApp.Enum(), To: new(uint64(3)), From: new(uint64(1)), Term: new(uint64(3)), LogTerm: new(uint64(2)),
			Index: new(uint64(8)), Commit: new(uint64(8)), Entries: []*pb.Entry{ent(9, 3, "a"), ent(10, 3, "")}},
		{Type: pb.MsgAppResp.Enum(), To: new(uint64(1)), From: new(uint64(3)), Term: new(uint64(3)), Reject: new(true),
			RejectHint: new(uint64(4)), LogTerm: new(uint64(1))},
		{Type: pb.MsgSnap.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(5)), Snapshot: snap(40, 4, "state")},
		{Type: pb.MsgVote.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(6)), Context: []byte(campaignTransfer)},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b := EncodeMessage(m)
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if !bytes.Equal(EncodeMessage(got), b) || sig(got) != sig(m) {
			t.Fatalf("round trip:\n got %s\nwant %s", sig(got), sig(m))
		}
	}
}

// sig is m's content through its getters, so that absent and zero compare
// equal, as raft reads them.
func sig(m *pb.Message) string {
	s := fmt.Sprintf("%v %d>%d t%d lt%d i%d c%d v%d r%v rh%d ctx%q", m.GetType(), m.GetFrom(), m.GetTo(), m.GetTerm(),
		m.GetLogTerm(), m.GetIndex(), m.GetCommit(), m.GetVote(), m.GetReject(), m.GetRejectHint(), m.GetContext())
	s += describe(Recovered{Snapshot: m.GetSnapshot(), Entries: m.GetEntries()})
	return s
}

func FuzzDecodeMessage(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(EncodeMessage(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		again, err := DecodeMessage(EncodeMessage(m))
		if err != nil || sig(again) != sig(m) {
			t.Fatalf("accepted message does not round-trip: %v\n%v\n%v", err, m, again)
		}
	})
}
