package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/wharfmq/wharf/protocol"
)

// errNoNameServer: a cluster call on an Admin built without WithNameServer.
var errNoNameServer = fmt.Errorf("%w: no name server (build the Admin WithNameServer)", ErrInvalidParameter)

// ClusterInfo lists every broker a name server knows (GET_BROKER_CLUSTER_INFO),
// sorted by cluster, group and brokerId, dead ones included (Alive false).
func (a *Admin) ClusterInfo(ctx context.Context) (protocol.ClusterInfo, error) {
	if a.ns == nil {
		return protocol.ClusterInfo{}, errNoNameServer
	}
	ci, err := a.ns.clusterInfo(ctx)
	if err != nil {
		return protocol.ClusterInfo{}, err
	}
	return *ci, nil
}

// TopicRoute returns topic's route as a name server has it
// (GET_ROUTEINFO_BY_TOPIC): the groups hosting it, their queues and
// brokers. A topic no live group hosts is an error wrapping
// ErrTopicNotExist.
func (a *Admin) TopicRoute(ctx context.Context, topic string) (protocol.RouteData, error) {
	if a.ns == nil {
		return protocol.RouteData{}, errNoNameServer
	}
	_, rd, err := a.ns.routeData(ctx, topic)
	if err != nil {
		return protocol.RouteData{}, err
	}
	return *rd, nil
}

// clusterMasters lists the addresses of the live masters of cluster, as
// ClusterInfo has them, sorted.
func clusterMasters(ci protocol.ClusterInfo, cluster string) []string {
	var addrs []string
	for _, b := range ci.Brokers {
		if b.ClusterName == cluster && b.BrokerID == protocol.MasterID && b.Alive && b.BrokerRole != RoleSlave {
			addrs = append(addrs, b.BrokerAddr)
		}
	}
	slices.Sort(addrs)
	return addrs
}

// CreateTopicInCluster creates topic, with queues read and write queues
// (0: 8) and read+write permission, on every live master of cluster (the
// masters a name server's ClusterInfo lists) and returns their addresses.
// A master that has the topic already gets this configuration
// (UPDATE_AND_CREATE_TOPIC), so the call can be repeated after a partial
// failure. It fails if the cluster has no live master; when some masters
// fail, the error names each and the addresses returned are the ones
// that succeeded. The routes show the topic once each master has
// registered its change with the name servers.
func (a *Admin) CreateTopicInCluster(ctx context.Context, cluster, topic string, queues int32) ([]string, error) {
	tc, err := topicDefaults(protocol.TopicConfig{Topic: topic, ReadQueueNums: queues, WriteQueueNums: queues})
	if err != nil {
		return nil, err
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	masters := clusterMasters(ci, cluster)
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w: cluster %q has no live master", ErrBrokerUnavailable, cluster)
	}
	var done []string
	var errs []error
	for _, addr := range masters {
		c := newConn(addr, &a.o, nil)
		_, err := c.do(ctx, &protocol.UpdateTopicRequest{TopicConfig: tc}, nil, a.o.timeout)
		c.close()
		if err != nil {
			errs = append(errs, fmt.Errorf("master %s: %w", addr, err))
			continue
		}
		done = append(done, addr)
	}
	if len(errs) > 0 {
		return done, fmt.Errorf("create topic %s in cluster %s: %w", topic, cluster, errors.Join(errs...))
	}
	return done, nil
}
