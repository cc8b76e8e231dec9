package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/wharfmq/wharf/protocol"
)

// NameServerTopics lists every topic a name server has a route for
// (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted.
func (a *Admin) NameServerTopics(ctx context.Context) ([]string, error) {
	if a.ns == nil {
		return nil, errNoNameServer
	}
	var list protocol.TopicNameList
	if _, err := a.ns.do(ctx, &protocol.GetAllTopicListRequest{}, &list); err != nil {
		return nil, fmt.Errorf("topic list: %w", err)
	}
	names := make([]string, 0, len(list.Topics))
	for _, t := range list.Topics {
		names = append(names, t.Topic)
	}
	return names, nil
}

// DeleteTopicInNameServers drops topic from the routes of cluster's groups
// (every group if cluster is "") on every name server of WithNameServer
// (DELETE_TOPIC_IN_NAMESRV): name servers are independent, so each one is
// told. Deleting the topic on the brokers is the caller's other step, made
// first, or a broker's next registration brings the topic back. The error
// names each server that failed.
func (a *Admin) DeleteTopicInNameServers(ctx context.Context, topic, cluster string) error {
	if a.ns == nil {
		return errNoNameServer
	}
	var errs []error
	for _, c := range a.ns.conns {
		if _, err := c.do(ctx, &protocol.DeleteTopicInNamesrvRequest{Topic: topic, ClusterName: cluster}, nil, a.o.timeout); err != nil {
			errs = append(errs, fmt.Errorf("name server %s: %w", c.addr, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete topic %s in name servers: %w", topic, errors.Join(errs...))
	}
	return nil
}
