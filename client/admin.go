package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Admin manages topics and offsets and looks messages up. It is safe for
// concurrent use.
type Admin struct {
	o  options
	c  *conn        // the broker addr names; its calls fail without one
	ns *nameServers // WithNameServer's; nil without
}

// NewAdmin connects to the broker at addr. With WithNameServer it
// connects to a name server too (and addr may be ""): ClusterInfo,
// TopicRoute and CreateTopicInCluster ask the name servers, and the other
// calls, which are a single broker's, need addr.
func NewAdmin(addr string, opts ...Option) (*Admin, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	a := &Admin{o: o}
	a.c = newConn(addr, &a.o, nil)
	if o.nameServers != "" {
		addrs, err := parseNameServers(o.nameServers)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidParameter, err)
		}
		a.ns = newNameServers(addrs, &a.o)
		ctx, cancel := context.WithTimeout(context.Background(), o.dialTimeout)
		defer cancel()
		if err := a.ns.connect(ctx); err != nil {
			a.ns.close()
			return nil, err
		}
		if addr == "" {
			return a, nil
		}
	}
	if err := a.c.connect(context.Background()); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// Close fails calls in flight with ErrClosed and closes the connections.
func (a *Admin) Close() error {
	a.c.close()
	if a.ns != nil {
		a.ns.close()
	}
	return nil
}

// CreateTopic creates a topic; it fails with ErrTopicExist if it exists.
// Zero queue counts default to 8 and a zero Perm to read+write.
func (a *Admin) CreateTopic(ctx context.Context, tc protocol.TopicConfig) error {
	tc, err := topicDefaults(tc)
	if err != nil {
		return err
	}
	_, err = a.c.do(ctx, &protocol.CreateTopicRequest{TopicConfig: tc}, nil, a.o.timeout)
	return err
}

// UpdateTopic creates a topic or replaces its configuration (defaults as
// for CreateTopic).
func (a *Admin) UpdateTopic(ctx context.Context, tc protocol.TopicConfig) error {
	tc, err := topicDefaults(tc)
	if err != nil {
		return err
	}
	_, err = a.c.do(ctx, &protocol.UpdateTopicRequest{TopicConfig: tc}, nil, a.o.timeout)
	return err
}

func topicDefaults(tc protocol.TopicConfig) (protocol.TopicConfig, error) {
	if err := protocol.ValidateTopic(tc.Topic); err != nil {
		return tc, fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	if tc.ReadQueueNums == 0 && tc.WriteQueueNums == 0 {
		tc.ReadQueueNums, tc.WriteQueueNums = 8, 8
	} else if tc.ReadQueueNums == 0 {
		tc.ReadQueueNums = tc.WriteQueueNums
	} else if tc.WriteQueueNums == 0 {
		tc.WriteQueueNums = tc.ReadQueueNums
	}
	if tc.ReadQueueNums < 0 || tc.WriteQueueNums < 0 {
		return tc, fmt.Errorf("%w: negative queue count", ErrInvalidParameter)
	}
	if tc.Perm == 0 {
		tc.Perm = protocol.PermRead | protocol.PermWrite
	}
	return tc, nil
}

// DeleteTopic deletes a topic; it fails with ErrTopicNotExist if absent.
func (a *Admin) DeleteTopic(ctx context.Context, topic string) error {
	_, err := a.c.do(ctx, &protocol.DeleteTopicRequest{Topic: topic}, nil, a.o.timeout)
	return err
}

// ListTopics returns every topic of the broker.
func (a *Admin) ListTopics(ctx context.Context) ([]protocol.TopicConfig, error) {
	return a.c.listTopics(ctx)
}

// GetTopic returns one topic's config; ErrTopicNotExist if absent.
func (a *Admin) GetTopic(ctx context.Context, topic string) (protocol.TopicConfig, error) {
	return a.c.topicConfig(ctx, topic)
}

// GetMinOffset returns a queue's oldest stored offset.
func (a *Admin) GetMinOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	return a.c.minOffset(ctx, topic, queueID)
}

// GetMaxOffset returns a queue's max offset: the offset the next message
// will get (the queue holds [min, max)).
func (a *Admin) GetMaxOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	return a.c.maxOffset(ctx, topic, queueID)
}

// QueryConsumerOffset returns a group's committed offset of one queue; an
// error wrapping ErrNotFound if it has none.
func (a *Admin) QueryConsumerOffset(ctx context.Context, group, topic string, queueID int32) (int64, error) {
	return a.c.queryConsumerOffset(ctx, group, topic, queueID)
}

// UpdateConsumerOffset commits a group's offset of one queue.
func (a *Admin) UpdateConsumerOffset(ctx context.Context, group, topic string, queueID int32, offset int64) error {
	return a.c.updateConsumerOffset(ctx, group, topic, queueID, offset)
}

// GetConsumerOffsets lists a group's offsets with the queues' bounds, for
// one topic or (topic "") all topics the group has offsets for.
func (a *Admin) GetConsumerOffsets(ctx context.Context, group, topic string) ([]protocol.ConsumerQueueOffset, error) {
	var resp protocol.ConsumerOffsetsResponse
	if _, err := a.c.do(ctx, &protocol.GetConsumerOffsetsRequest{ConsumerGroup: group, Topic: topic}, &resp, a.o.timeout); err != nil {
		return nil, err
	}
	return resp.Offsets, nil
}

// QueryByKey returns up to max messages of topic whose KEYS (any word) or
// UNIQ_KEY equals key, stored between begin and end (zero times: since the
// epoch, until now plus a minute). No match is an empty result, not an error.
func (a *Admin) QueryByKey(ctx context.Context, topic, key string, begin, end time.Time, max int) ([]protocol.MessageExt, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidParameter)
	}
	if max <= 0 {
		max = 32
	}
	req := &protocol.QueryMessageRequest{Topic: topic, Key: key, MaxNum: int32(min(max, 1<<20))}
	if !begin.IsZero() {
		req.BeginTimestamp = begin.UnixMilli()
	}
	if end.IsZero() {
		req.EndTimestamp = time.Now().Add(time.Minute).UnixMilli()
	} else {
		req.EndTimestamp = end.UnixMilli()
	}
	var resp protocol.QueryMessageResponse
	if _, err := a.c.do(ctx, req, &resp, a.o.timeout); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return resp.Messages, nil
}

// ViewMessage reads one message by its offset message id (SendResult.MsgID);
// an error wrapping ErrNotFound if there is none.
func (a *Admin) ViewMessage(ctx context.Context, msgID string) (protocol.MessageExt, error) {
	if _, _, err := protocol.ParseOffsetMsgID(msgID); err != nil {
		return protocol.MessageExt{}, fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	var resp protocol.ViewMessageResponse
	f, err := a.c.do(ctx, &protocol.ViewMessageRequest{MsgID: msgID}, &resp, a.o.timeout)
	if err != nil {
		return protocol.MessageExt{}, err
	}
	if len(f.Body) == 0 {
		return protocol.MessageExt{}, fmt.Errorf("%w: message %s (empty answer)", ErrNotFound, msgID)
	}
	return resp.Message, nil
}

// RuntimeInfo returns the broker's statistics.
func (a *Admin) RuntimeInfo(ctx context.Context) (protocol.BrokerRuntimeInfo, error) {
	var info protocol.BrokerRuntimeInfo
	_, err := a.c.do(ctx, &protocol.GetBrokerRuntimeInfoRequest{}, &info, a.o.timeout)
	return info, err
}

// Broker roles, for UpdateBrokerRole.
const (
	RoleAsyncMaster = "ASYNC_MASTER"
	RoleSyncMaster  = "SYNC_MASTER"
	RoleSlave       = "SLAVE"
)

// UpdateBrokerRole turns the broker, while it runs, into a master (role
// RoleAsyncMaster or RoleSyncMaster, masterHAAddr empty) or into a slave
// of the master whose haListenPort is masterHAAddr (host:port), reporting
// brokerID to it (0: the broker keeps its own id, or takes 1 if it was a
// master). It returns once the role is in force.
//
// A master demoted to slave answers the sends still waiting for their
// replication or flush with FLUSH_SLAVE_TIMEOUT or FLUSH_DISK_TIMEOUT
// (stored, not confirmed) and every later send with NOT_MASTER. A slave
// whose log is not a prefix of its new master's is refused by that master:
// the call still succeeds, and RuntimeInfo's HAStatus tells why the slave
// does not replicate. It fails with ErrInvalidParameter for a bad role,
// address or id, and ErrSystemBusy while another role change runs.
func (a *Admin) UpdateBrokerRole(ctx context.Context, role, masterHAAddr string, brokerID int64) error {
	if err := validRole(role, masterHAAddr, brokerID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	req := &protocol.UpdateBrokerRoleRequest{BrokerRole: role, HAMasterAddress: masterHAAddr, BrokerID: brokerID}
	_, err := a.c.do(ctx, req, nil, a.o.timeout)
	return err
}

// validRole checks a role change before it is sent, so a mistake is
// reported with what is wrong rather than only the broker's status.
func validRole(role, masterHAAddr string, brokerID int64) error {
	switch role {
	case RoleAsyncMaster, RoleSyncMaster:
		if masterHAAddr != "" {
			return fmt.Errorf("a %s has no master: master address %q must be empty", role, masterHAAddr)
		}
		if brokerID != 0 {
			return fmt.Errorf("a %s has brokerId 0, not %d", role, brokerID)
		}
	case RoleSlave:
		if masterHAAddr == "" {
			return errors.New("a SLAVE needs its master's address (host:haListenPort)")
		}
		host, port, err := net.SplitHostPort(masterHAAddr)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("master address %q: want host:port of the master's haListenPort", masterHAAddr)
		}
		if brokerID < 0 {
			return fmt.Errorf("brokerId %d: a slave's is > 0 (0 keeps the broker's own)", brokerID)
		}
	default:
		return fmt.Errorf("role %q: want %s, %s or %s", role, RoleAsyncMaster, RoleSyncMaster, RoleSlave)
	}
	return nil
}
