package client

import (
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// TestRouteBookExported: the exported book is the Producer's: write
// queues of live masters only, and the per-name-server version floor.
func TestRouteBookExported(t *testing.T) {
	rd := func(v int64, alive bool) *protocol.RouteData {
		dead := master("b", "mb")
		dead.Alive = alive
		return &protocol.RouteData{Topic: "T", Version: v,
			QueueDatas: []protocol.QueueData{
				{BrokerName: "a", ReadQueueNums: 2, WriteQueueNums: 2, Perm: rw},
				{BrokerName: "b", ReadQueueNums: 2, WriteQueueNums: 2, Perm: rw}},
			Brokers: []protocol.BrokerRef{master("a", "ma"), dead}}
	}
	var b RouteBook
	tests := []struct {
		ns     string
		v      int64
		alive  bool
		taken  bool
		queues int // queues in the route
	}{
		{"ns1", 10, true, true, 4},
		{"ns1", 9, true, false, 0},  // older from the same server
		{"ns1", 11, false, true, 2}, // b's master is dead: its queues are not writable
		{"ns2", 1, true, true, 4},   // another server's numbers are its own
	}
	for i, tt := range tests {
		r, ok := b.Take(tt.ns, rd(tt.v, tt.alive), time.Time{})
		if ok != tt.taken || (ok && len(r.Queues) != tt.queues) {
			t.Errorf("take %d (%s v%d): taken %v with %d queues, want %v with %d", i, tt.ns, tt.v, ok, len(r.Queues), tt.taken, tt.queues)
		}
	}
}
