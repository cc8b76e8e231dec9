package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
	"github.com/wharfmq/wharf/protocol"
)

// TestActorsConfigNameServers: the name-server keys reach the actors, and
// the addresses the broker announces are brokerIP1 with its two ports
// (bracketed for IPv6).
func TestActorsConfigNameServers(t *testing.T) {
	c := brokerconf.Default()
	c.BrokerClusterName, c.NamesrvAddr, c.BrokerIP1, c.ListenPort, c.HAListenPort = "prod", "a:9876; b:9866", "::1", 20911, 20999
	c.BrokerHeartbeatInterval, c.BrokerNotActiveTimeoutMillis, c.RegisterNameServerPeriod = 500, 3000, 10_000
	a := actorsConfig(c, c.StoreConfig())
	if a.BrokerClusterName != "prod" || !reflect.DeepEqual(a.NamesrvAddr, []string{"a:9876", "b:9866"}) {
		t.Fatalf("cluster %q name servers %q", a.BrokerClusterName, a.NamesrvAddr)
	}
	if a.BrokerAddr != "[::1]:20911" || a.HAServerAddr != "[::1]:20999" {
		t.Fatalf("announced %s, HA %s", a.BrokerAddr, a.HAServerAddr)
	}
	if a.BrokerHeartbeatInterval != 500*time.Millisecond || a.HeartbeatTimeout != 3*time.Second || a.RegisterNameServerPeriod != 10*time.Second {
		t.Fatalf("durations %v %v %v", a.BrokerHeartbeatInterval, a.HeartbeatTimeout, a.RegisterNameServerPeriod)
	}
	if a := actorsConfig(brokerconf.Default(), brokerconf.Default().StoreConfig()); a.NamesrvAddr != nil {
		t.Fatalf("default name servers %q, want none (standalone)", a.NamesrvAddr)
	}
}

func TestStatusShowsNameServers(t *testing.T) {
	var out bytes.Buffer
	info := protocol.BrokerRuntimeInfo{BrokerName: "a", BrokerRole: "ASYNC_MASTER", Extra: map[string]string{"namesrv": "a:9876 registered"}}
	printStatus(&out, statusOf(info))
	if !strings.Contains(out.String(), "name servers") || !strings.Contains(out.String(), " a:9876 registered\n") {
		t.Fatalf("status:\n%s", out.String())
	}
	out.Reset()
	printStatus(&out, statusOf(protocol.BrokerRuntimeInfo{BrokerName: "a", BrokerRole: "ASYNC_MASTER"}))
	if strings.Contains(out.String(), "name servers") {
		t.Fatalf("a standalone broker's status names name servers:\n%s", out.String())
	}
}
