package client

import (
	"context"
	"fmt"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// do sends req and returns its response frame. A status other than SUCCESS
// is returned as a *StatusError (with the frame, whose fields the caller may
// still want). On SUCCESS the response is decoded into into (may be nil).
func (c *conn) do(ctx context.Context, req protocol.Request, into protocol.Fields, timeout time.Duration) (*protocol.Frame, error) {
	f, err := c.call(ctx, req, timeout)
	if err != nil {
		return nil, err
	}
	if f.Status != protocol.StatusOK {
		return f, statusError(f)
	}
	if err := c.decode(f, into); err != nil {
		return f, err
	}
	return f, nil
}

func (c *conn) decode(f *protocol.Frame, into protocol.Fields) error {
	if err := protocol.DecodeResponse(f, c.o.limits, into); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return nil
}

// decodeSend is decode of a SEND's answer, by a concrete call: resp stays
// on the caller's stack.
func (c *conn) decodeSend(f *protocol.Frame, resp *protocol.SendResponse) error {
	if err := protocol.DecodeSendResponse(f, c.o.limits, resp); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return nil
}

// decodeSendBatch is decode of a SEND_BATCH's answer, by the hand-written
// decoder (protocol.DecodeSendBatchResponse).
func (c *conn) decodeSendBatch(f *protocol.Frame, resp *protocol.SendBatchResponse) error {
	if err := protocol.DecodeSendBatchResponse(f, c.o.limits, resp); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return nil
}

func (c *conn) listTopics(ctx context.Context) ([]protocol.TopicConfig, error) {
	var resp protocol.TopicListResponse
	if _, err := c.do(ctx, &protocol.ListTopicsRequest{}, &resp, c.o.timeout); err != nil {
		return nil, err
	}
	return resp.Topics, nil
}

// topicConfig finds one topic in the broker's list (ErrTopicNotExist if absent).
func (c *conn) topicConfig(ctx context.Context, topic string) (protocol.TopicConfig, error) {
	topics, err := c.listTopics(ctx)
	if err != nil {
		return protocol.TopicConfig{}, err
	}
	for _, t := range topics {
		if t.Topic == topic {
			return t, nil
		}
	}
	return protocol.TopicConfig{}, fmt.Errorf("%w: %q on %s", ErrTopicNotExist, topic, c.addr)
}

func (c *conn) offset(ctx context.Context, req protocol.Request) (int64, error) {
	var resp protocol.OffsetResponse
	if _, err := c.do(ctx, req, &resp, c.o.timeout); err != nil {
		return 0, err
	}
	return resp.Offset, nil
}

func (c *conn) minOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	return c.offset(ctx, &protocol.GetMinOffsetRequest{Topic: topic, QueueID: queueID})
}

func (c *conn) maxOffset(ctx context.Context, topic string, queueID int32) (int64, error) {
	return c.offset(ctx, &protocol.GetMaxOffsetRequest{Topic: topic, QueueID: queueID})
}

// queryConsumerOffset returns the committed offset; ErrNotFound if none.
func (c *conn) queryConsumerOffset(ctx context.Context, group, topic string, queueID int32) (int64, error) {
	return c.offset(ctx, &protocol.QueryConsumerOffsetRequest{ConsumerGroup: group, Topic: topic, QueueID: queueID})
}

func (c *conn) updateConsumerOffset(ctx context.Context, group, topic string, queueID int32, offset int64) error {
	_, err := c.do(ctx, &protocol.UpdateConsumerOffsetRequest{
		ConsumerGroup: group, Topic: topic, QueueID: queueID, CommitOffset: offset,
	}, nil, c.o.timeout)
	return err
}

func nowMs() int64 { return time.Now().UnixMilli() }
