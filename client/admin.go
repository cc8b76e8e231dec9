package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Admin manages topics and offsets and looks messages up. It is safe for
// concurrent use.
type Admin struct {
	o options
	c *conn
}

// NewAdmin connects to the broker at addr.
func NewAdmin(addr string, opts ...Option) (*Admin, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	a := &Admin{o: o}
	a.c = newConn(addr, &a.o, nil)
	if err := a.c.connect(context.Background()); err != nil {
		a.c.close()
		return nil, err
	}
	return a, nil
}

// Close fails calls in flight with ErrClosed and closes the connection.
func (a *Admin) Close() error {
	a.c.close()
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
