package netio

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/wharfmq/wharf/protocol"
)

// The name server's answers as RocketMQ's clients parse them: JSON bodies
// (TopicRouteData, ClusterInfo, TopicList) naming each broker by its
// remoting address. A broker without one (its remoting listener is off) is
// left out, with the queues of a group left with no broker: a RocketMQ
// client could not reach them.

type rmqQueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
}

// rmqBrokerData's brokerAddrs keys are brokerIds; encoding/json writes
// them quoted, which the Go client's hand parser and fastjson both take.
type rmqBrokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

type rmqTopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []rmqQueueData      `json:"queueDatas"`
	BrokerDatas       []rmqBrokerData     `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// brokerDatas groups the live brokers with a remoting address by group,
// in the order first seen.
func brokerDatas(refs []protocol.BrokerRef) []rmqBrokerData {
	var out []rmqBrokerData
	at := map[string]int{}
	for _, b := range refs {
		if !b.Alive || b.RemotingAddr == "" {
			continue
		}
		i, ok := at[b.BrokerName]
		if !ok {
			i = len(out)
			at[b.BrokerName] = i
			out = append(out, rmqBrokerData{Cluster: b.ClusterName, BrokerName: b.BrokerName, BrokerAddrs: map[string]string{}})
		}
		out[i].BrokerAddrs[strconv.FormatInt(b.BrokerID, 10)] = b.RemotingAddr
	}
	return out
}

func routeBody(r *protocol.RouteData) ([]byte, error) {
	rd := rmqTopicRouteData{BrokerDatas: brokerDatas(r.Brokers), FilterServerTable: map[string][]string{}}
	reachable := map[string]bool{}
	for _, b := range rd.BrokerDatas {
		reachable[b.BrokerName] = true
	}
	for _, q := range r.QueueDatas {
		if reachable[q.BrokerName] {
			rd.QueueDatas = append(rd.QueueDatas, rmqQueueData{BrokerName: q.BrokerName, ReadQueueNums: q.ReadQueueNums,
				WriteQueueNums: q.WriteQueueNums, Perm: q.Perm})
		}
	}
	if rd.QueueDatas == nil {
		rd.QueueDatas = []rmqQueueData{}
	}
	if rd.BrokerDatas == nil {
		rd.BrokerDatas = []rmqBrokerData{}
	}
	return json.Marshal(&rd)
}

func clusterBody(c *protocol.ClusterInfo) ([]byte, error) {
	refs := make([]protocol.BrokerRef, len(c.Brokers))
	for i := range c.Brokers {
		refs[i] = c.Brokers[i].BrokerRef
	}
	out := struct {
		BrokerAddrTable  map[string]rmqBrokerData `json:"brokerAddrTable"`
		ClusterAddrTable map[string][]string      `json:"clusterAddrTable"`
	}{map[string]rmqBrokerData{}, map[string][]string{}}
	for _, b := range brokerDatas(refs) {
		out.BrokerAddrTable[b.BrokerName] = b
		out.ClusterAddrTable[b.Cluster] = append(out.ClusterAddrTable[b.Cluster], b.BrokerName)
	}
	for _, names := range out.ClusterAddrTable {
		sort.Strings(names)
	}
	return json.Marshal(&out)
}

func topicListBody(l *protocol.TopicNameList) ([]byte, error) {
	out := struct {
		TopicList []string `json:"topicList"`
	}{make([]string, 0, len(l.Topics))}
	for _, t := range l.Topics {
		out.TopicList = append(out.TopicList, t.Topic)
	}
	return json.Marshal(&out)
}

// topicConfigBody is GET_ALL_TOPIC_CONFIG's answer as RocketMQ's admin
// reads it: TopicConfigSerializeWrapper, topics by name.
func topicConfigBody(l *protocol.TopicListResponse) ([]byte, error) {
	type topicConfig struct {
		TopicName      string `json:"topicName"`
		ReadQueueNums  int32  `json:"readQueueNums"`
		WriteQueueNums int32  `json:"writeQueueNums"`
		Perm           int32  `json:"perm"`
	}
	out := struct {
		TopicConfigTable map[string]topicConfig `json:"topicConfigTable"`
	}{make(map[string]topicConfig, len(l.Topics))}
	for _, t := range l.Topics {
		out.TopicConfigTable[t.Topic] = topicConfig{t.Topic, t.ReadQueueNums, t.WriteQueueNums, t.Perm}
	}
	return json.Marshal(&out)
}
