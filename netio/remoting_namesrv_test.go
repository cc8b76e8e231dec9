package netio_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/protocol/remoting"
)

// TestRemotingNameServer: a RocketMQ client's view of a name server's
// remoting port: the route names the brokers' remoting addresses, in the
// encoding the Go client parses, and a send to that address lands.
func TestRemotingNameServer(t *testing.T) {
	ns := brokertest.StartNameServer(t)
	b := brokertest.Start(t, brokertest.WithRemoting())
	b.CreateTopic("demo", 2)
	b.RegisterWith(ns, "DefaultCluster", "broker-a")
	plain := brokertest.Start(t) // no remoting listener: left out of the routes
	plain.CreateTopic("demo", 2)
	plain.RegisterWith(ns, "DefaultCluster", "broker-b")
	c := dialRemoting(t, ns.RemotingAddr())

	a := c.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "demo"}, nil)
	want(t, a, remoting.Success, "GET_ROUTEINFO_BY_TOPIC")
	var route struct {
		QueueDatas []struct {
			BrokerName     string `json:"brokerName"`
			ReadQueueNums  int    `json:"readQueueNums"`
			WriteQueueNums int    `json:"writeQueueNums"`
			Perm           int    `json:"perm"`
		} `json:"queueDatas"`
		BrokerDatas []struct {
			Cluster     string            `json:"cluster"`
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(a.Body, &route); err != nil {
		t.Fatalf("route body %s: %v", a.Body, err)
	}
	if len(route.QueueDatas) != 1 || route.QueueDatas[0].BrokerName != "broker-a" || route.QueueDatas[0].WriteQueueNums != 2 ||
		route.QueueDatas[0].Perm != 6 || len(route.BrokerDatas) != 1 || route.BrokerDatas[0].Cluster != "DefaultCluster" ||
		route.BrokerDatas[0].BrokerAddrs["0"] != b.RemotingAddr() {
		t.Fatalf("route %s, want broker-a only at %s", a.Body, b.RemotingAddr())
	}
	// The Go client's own parse of brokerAddrs (internal/route.go): the
	// object's text between the braces, split at commas, then at the
	// first colon, quotes dropped.
	s := string(a.Body)
	i := strings.Index(s, `"brokerAddrs":{`) + len(`"brokerAddrs":{`)
	entry := s[i : i+strings.Index(s[i:], "}")]
	id, addr, _ := strings.Cut(entry, ":")
	if strings.ReplaceAll(id, `"`, "") != "0" || strings.ReplaceAll(addr, `"`, "") != b.RemotingAddr() {
		t.Fatalf("the Go client would read brokerAddrs %q as id %s, addr %s", entry, id, addr)
	}

	want(t, c.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "nope"}, nil), remoting.TopicNotExist, "route of an unknown topic")
	a = c.call(remoting.GetAllTopicListFromNameSrv, nil, nil)
	want(t, a, remoting.Success, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER")
	if !strings.Contains(string(a.Body), `"demo"`) {
		t.Fatalf("topic list %s", a.Body)
	}
	a = c.call(remoting.GetBrokerClusterInfo, nil, nil)
	want(t, a, remoting.Success, "GET_BROKER_CLUSTER_INFO")
	var ci struct {
		BrokerAddrTable  map[string]struct{ BrokerAddrs map[string]string } `json:"brokerAddrTable"`
		ClusterAddrTable map[string][]string                                `json:"clusterAddrTable"`
	}
	if err := json.Unmarshal(a.Body, &ci); err != nil || ci.BrokerAddrTable["broker-a"].BrokerAddrs["0"] != b.RemotingAddr() ||
		len(ci.ClusterAddrTable["DefaultCluster"]) != 1 {
		t.Fatalf("cluster info %s: %v", a.Body, err)
	}

	bc := dialRemoting(t, route.BrokerDatas[0].BrokerAddrs["0"])
	a = bc.call(remoting.SendMessage, map[string]string{"producerGroup": "pg", "topic": "demo", "queueId": "0",
		"properties": "TAGS\x01t\x02"}, []byte("via the route"))
	want(t, a, remoting.Success, "SEND_MESSAGE to the routed address")
}
