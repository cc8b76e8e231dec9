package raftnode

import (
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

func types(ms []*pb.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.GetType().String())
	}
	return out
}

// TestReadyHoldsMessagesUntilPersisted walks one election of node 1 of 3 by
// hand: the vote requests that follow the term bump are released only after
// the hard state carrying that term and vote was reported durable.
func TestReadyHoldsMessagesUntilPersisted(t *testing.T) {
	now := epoch
	n, err := NewNode(Config{ID: 1, Peers: []uint64{1, 2, 3}, TickInterval: tick, ElectionTimeout: election, Seed: 1}, Recovered{}, now)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		input    func()
		persist  bool     // the Ready asks for a write
		messages []string // and releases these messages
	}{
		{"bootstrap", func() {}, true, nil},
		{"bootstrap persisted", func() { n.Persisted(now) }, false, nil},
		{"timer not yet expired", func() { now = now.Add(election - tick); n.Tick(now) }, false, nil},
		{"timer expired: pre-vote needs no write", func() { now = now.Add(election + tick); n.Tick(now) },
			false, []string{"MsgPreVote", "MsgPreVote"}},
		{"pre-vote granted: term and vote to persist, votes held", func() {
			must(t, n.Step(now, &pb.Message{Type: pb.MsgPreVoteResp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(1))}))
		}, true, nil},
		{"persisted: the votes go out", func() { n.Persisted(now) }, false, []string{"MsgVote", "MsgVote"}},
	}
	for _, s := range steps {
		s.input()
		rd := n.Ready()
		if got := !rd.Persist.Empty(); got != s.persist {
			t.Fatalf("%s: persist %v, want %v (%+v)", s.name, got, s.persist, rd.Persist)
		}
		if got := types(rd.Messages); len(got) != len(s.messages) || len(got) > 0 && got[0] != s.messages[0] {
			t.Fatalf("%s: messages %v, want %v", s.name, got, s.messages)
		}
	}
}

func TestNewNodeRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{ID: 0, Peers: []uint64{1}, TickInterval: tick, ElectionTimeout: election},
		{ID: 1, Peers: []uint64{1}, TickInterval: 0, ElectionTimeout: election},
		{ID: 1, Peers: []uint64{1}, TickInterval: tick, ElectionTimeout: tick},
		{ID: 1, TickInterval: tick, ElectionTimeout: election}, // a new group without peers
	} {
		if _, err := NewNode(cfg, Recovered{}, time.Time{}); err == nil {
			t.Errorf("NewNode(%+v) accepted", cfg)
		}
	}
}
