package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// The human output of cluster list and topic route says which brokers are
// dead and which groups take no writes.
func TestClusterAndRouteOutput(t *testing.T) {
	now := time.UnixMilli(100_000)
	master := protocol.BrokerRef{ClusterName: "c", BrokerName: "a", BrokerID: 0, BrokerAddr: "h1:10911", BrokerRole: "ASYNC_MASTER"}
	slave := protocol.BrokerRef{ClusterName: "c", BrokerName: "a", BrokerID: 1, BrokerAddr: "h2:10911", BrokerRole: "SLAVE", Alive: true}
	var out strings.Builder
	printCluster(&out, []protocol.BrokerInfo{
		{BrokerRef: master, LiveSinceMs: 10_000, LastHeartbeatMs: 93_000},
		{BrokerRef: slave, LiveSinceMs: 40_000, LastHeartbeatMs: 99_500},
	}, map[string]*brokerStats{"h1:10911": {MaxOffset: 5}, "h2:10911": {MaxOffset: 1234, PutTPS: 12.5}}, true, now)
	for _, want := range []string{"h1:10911  ASYNC_MASTER  NO     silent 7s  -           -", "h2:10911  SLAVE         yes    1m0s ago   1234        12.5"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("cluster list lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printRoute(&out, &protocol.RouteData{Topic: "orders", Version: 7,
		QueueDatas: []protocol.QueueData{{BrokerName: "a", ReadQueueNums: 4, Perm: protocol.PermRead}},
		Brokers:    []protocol.BrokerRef{master, slave}})
	for _, want := range []string{"route version 7", "a      4            0             R-- (4)  0=h1:10911(dead) 1=h2:10911"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("topic route lacks %q:\n%s", want, out.String())
		}
	}
}
