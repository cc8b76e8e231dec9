package client

import (
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

func TestParseNameServers(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a:9876", []string{"a:9876"}},
		{"a:9876;b:9876", []string{"a:9876", "b:9876"}},
		{" a:1 ; b:2;;a:1, c:3 ", []string{"a:1", "b:2", "c:3"}},
		{"", nil},
		{" ; ", nil},
	}
	for _, tt := range tests {
		got, err := parseNameServers(tt.in)
		if (err != nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
			t.Errorf("parseNameServers(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

const rw = protocol.PermRead | protocol.PermWrite

func master(group, addr string) protocol.BrokerRef {
	return protocol.BrokerRef{BrokerName: group, BrokerID: 0, BrokerAddr: addr, BrokerRole: RoleAsyncMaster, Alive: true}
}

func slave(group, addr string) protocol.BrokerRef {
	return protocol.BrokerRef{BrokerName: group, BrokerID: 1, BrokerAddr: addr, BrokerRole: RoleSlave, Alive: true}
}

func TestWriteQueues(t *testing.T) {
	qd := func(group string, w, perm int32) protocol.QueueData {
		return protocol.QueueData{BrokerName: group, ReadQueueNums: 2, WriteQueueNums: w, Perm: perm}
	}
	dead := master("g1", "m1")
	dead.Alive = false
	slaveAt0 := master("g1", "m1")
	slaveAt0.BrokerRole = RoleSlave
	tests := []struct {
		name    string
		queues  []protocol.QueueData
		brokers []protocol.BrokerRef
		want    []sendpath.QueueRef
	}{
		{name: "two groups, keyed by their masters, in the route's order",
			queues:  []protocol.QueueData{qd("g1", 2, rw), qd("g2", 1, rw)},
			brokers: []protocol.BrokerRef{master("g1", "m1"), slave("g1", "s1"), master("g2", "m2")},
			want:    []sendpath.QueueRef{{Broker: "m1", QueueID: 0}, {Broker: "m1", QueueID: 1}, {Broker: "m2", QueueID: 0}}},
		{name: "a masterless group (read from its slave) takes no sends",
			queues:  []protocol.QueueData{qd("g1", 0, protocol.PermRead), qd("g2", 1, rw)},
			brokers: []protocol.BrokerRef{slave("g1", "s1"), master("g2", "m2")},
			want:    []sendpath.QueueRef{{Broker: "m2", QueueID: 0}}},
		{name: "writable queue data but no master listed: none",
			queues:  []protocol.QueueData{qd("g1", 2, rw)},
			brokers: []protocol.BrokerRef{slave("g1", "s1")}},
		{name: "a dead master: none", queues: []protocol.QueueData{qd("g1", 2, rw)}, brokers: []protocol.BrokerRef{dead}},
		{name: "brokerId 0 in the SLAVE role is no master", queues: []protocol.QueueData{qd("g1", 2, rw)},
			brokers: []protocol.BrokerRef{slaveAt0}},
		{name: "read-only perm: none", queues: []protocol.QueueData{qd("g1", 2, protocol.PermRead)},
			brokers: []protocol.BrokerRef{master("g1", "m1")}},
		{name: "write-only perm: writable", queues: []protocol.QueueData{qd("g1", 1, protocol.PermWrite)},
			brokers: []protocol.BrokerRef{master("g1", "m1")}, want: []sendpath.QueueRef{{Broker: "m1", QueueID: 0}}},
		{name: "no write queues: none", queues: []protocol.QueueData{qd("g1", 0, rw)},
			brokers: []protocol.BrokerRef{master("g1", "m1")}},
		{name: "another group's master does not count",
			queues:  []protocol.QueueData{qd("g1", 1, rw)},
			brokers: []protocol.BrokerRef{master("g2", "m2")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := writeQueues(&protocol.RouteData{Topic: "T", QueueDatas: tt.queues, Brokers: tt.brokers})
			if !slices.Equal(got, tt.want) {
				t.Errorf("writeQueues = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRouteBook: versions are compared per name server; what the book
// takes gets increasing local versions, so the Table's last route is the
// last one taken.
func TestRouteBook(t *testing.T) {
	type fetch struct {
		ns      string
		version int64
		group   string // the route's one group, on broker addr = group
	}
	tests := []struct {
		name    string
		fetches []fetch
		want    []bool // taken?
		last    string // the broker of the Table's route at the end
	}{
		{name: "newer from the same server replaces",
			fetches: []fetch{{"a", 10, "m1"}, {"a", 11, "m2"}}, want: []bool{true, true}, last: "m2"},
		{name: "older from the same server is ignored (a delayed answer)",
			fetches: []fetch{{"a", 11, "m2"}, {"a", 10, "m1"}}, want: []bool{true, false}, last: "m2"},
		{name: "equal from the same server refreshes",
			fetches: []fetch{{"a", 11, "m1"}, {"a", 11, "m1"}}, want: []bool{true, true}, last: "m1"},
		{name: "another server's smaller number is not older: taken on a move",
			fetches: []fetch{{"a", 500, "m1"}, {"b", 20, "m2"}}, want: []bool{true, true}, last: "m2"},
		{name: "back to the first server: its own floor still holds",
			fetches: []fetch{{"a", 500, "m1"}, {"b", 20, "m2"}, {"a", 400, "m3"}, {"a", 501, "m4"}},
			want:    []bool{true, true, false, true}, last: "m4"},
		{name: "a restarted server continues above its old versions",
			fetches: []fetch{{"a", 500, "m1"}, {"a", 900, "m2"}}, want: []bool{true, true}, last: "m2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b routeBook
			tab := sendpath.NewTable(sendpath.Config{RouteTTL: time.Hour})
			for i, f := range tt.fetches {
				rd := &protocol.RouteData{Topic: "T", Version: f.version,
					QueueDatas: []protocol.QueueData{{BrokerName: f.group, ReadQueueNums: 1, WriteQueueNums: 1, Perm: rw}},
					Brokers:    []protocol.BrokerRef{master(f.group, f.group)}}
				r, ok := b.take(f.ns, rd, time.Time{})
				if ok != tt.want[i] {
					t.Fatalf("fetch %d (%s v%d): taken = %v, want %v", i, f.ns, f.version, ok, tt.want[i])
				}
				if ok && !tab.Update(r) {
					t.Fatalf("fetch %d: the Table refused a route the book took (version %d)", i, r.Version)
				}
			}
			r, _ := tab.Route("T")
			if len(r.Queues) != 1 || r.Queues[0].Broker != tt.last {
				t.Errorf("route at the end = %v, want broker %s", r.Queues, tt.last)
			}
		})
	}
}
