package netio_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/protocol/remoting"
)

func rmqHeartbeatBody(client, group string) []byte {
	return fmt.Appendf(nil, `{"clientID":%q,"producerDataSet":[],"consumerDataSet":[{"groupName":%q,"consumeType":"CONSUME_PASSIVELY",
"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"demo","subString":"*",
"expressionType":"TAG"}],"unitMode":false}]}`, client, group)
}

// readUntilNotify reads frames until the broker's NOTIFY_CONSUMER_IDS_CHANGED
// for group (a oneway request, not an answer).
func readUntilNotify(t *testing.T, c *rmqConn, group string) {
	t.Helper()
	for range 8 {
		a, err := c.read()
		if err != nil {
			t.Fatalf("waiting for the notification of %q: %v", group, err)
		}
		if a.Code == remoting.NotifyConsumerIdsChanged && !a.IsResponse() && a.IsOneway() && a.ExtFields["consumerGroup"] == group {
			return
		}
	}
	t.Fatalf("no notification of %q", group)
}

func consumerIDs(t *testing.T, c *rmqConn, group string) []string {
	t.Helper()
	a := c.call(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil)
	want(t, a, remoting.Success, "GET_CONSUMER_LIST_BY_GROUP")
	var body struct {
		IDs []string `json:"consumerIdList"`
	}
	if err := json.Unmarshal(a.Body, &body); err != nil {
		t.Fatalf("consumer list body %q: %v", a.Body, err)
	}
	slices.Sort(body.IDs)
	return body.IDs
}

// TestRemotingClientGroups: two RocketMQ members of a group over raw
// frames: each heartbeat that changes the group notifies the members on
// their connections, GET_CONSUMER_LIST_BY_GROUP lists them, a closed
// connection removes its member, and LOCK_BATCH_MQ hands a queue to one.
func TestRemotingClientGroups(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithRemoting())
	b.CreateTopic("demo", 2)
	c1, c2 := dialRemoting(t, b.RemotingAddr()), dialRemoting(t, b.RemotingAddr())

	// A heartbeat that changes the group is answered before the notices.
	want(t, c1.call(remoting.HeartBeat, nil, rmqHeartbeatBody("c1@1", "cg")), remoting.Success, "heartbeat")
	readUntilNotify(t, c1, "cg")
	want(t, c2.call(remoting.HeartBeat, nil, rmqHeartbeatBody("c2@2", "cg")), remoting.Success, "second member's heartbeat")
	readUntilNotify(t, c1, "cg")
	readUntilNotify(t, c2, "cg")
	if ids := consumerIDs(t, c1, "cg"); !slices.Equal(ids, []string{"c1@1", "c2@2"}) {
		t.Fatalf("members %v", ids)
	}

	lock := func(c *rmqConn, client string) string {
		body := fmt.Appendf(nil, `{"consumerGroup":"cg","clientId":%q,"mqSet":[{"topic":"demo","brokerName":"broker-a","queueId":1}]}`, client)
		a := c.call(remoting.LockBatchMQ, nil, body)
		want(t, a, remoting.Success, "LOCK_BATCH_MQ")
		return string(a.Body)
	}
	if got := lock(c1, "c1@1"); got != `{"lockOKMQSet":[{"topic":"demo","brokerName":"broker-a","queueId":1}]}` {
		t.Fatalf("c1's lock: %s", got)
	}
	if got := lock(c2, "c2@2"); got != `{"lockOKMQSet":[]}` {
		t.Fatalf("c2 locked c1's queue: %s", got)
	}

	c2.c.Close()
	readUntilNotify(t, c1, "cg")
	if ids := consumerIDs(t, c1, "cg"); !slices.Equal(ids, []string{"c1@1"}) {
		t.Fatalf("after c2's connection closed: %v", ids)
	}
}
