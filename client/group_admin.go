package client

import (
	"context"
	"fmt"

	"github.com/wharfmq/wharf/protocol"
)

// ListGroups returns the consumer groups the broker coordinates
// (GET_CONSUMER_GROUPS).
func (a *Admin) ListGroups(ctx context.Context) ([]protocol.GroupSummary, error) {
	var resp protocol.ConsumerGroupsResponse
	if _, err := a.c.do(ctx, &protocol.GetConsumerGroupsRequest{}, &resp, a.o.timeout); err != nil {
		return nil, err
	}
	return resp.Groups, nil
}

// DescribeGroup returns one group's members, assignment and per-queue
// committed offset, max offset and lag (DESCRIBE_CONSUMER_GROUP).
func (a *Admin) DescribeGroup(ctx context.Context, group string) (protocol.ConsumerGroupDescription, error) {
	var resp protocol.ConsumerGroupDescription
	if group == "" {
		return resp, fmt.Errorf("%w: empty group", ErrInvalidParameter)
	}
	_, err := a.c.do(ctx, &protocol.DescribeConsumerGroupRequest{Group: group}, &resp, a.o.timeout)
	return resp, err
}
