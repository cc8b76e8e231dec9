package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wharfmq/wharf/protocol"
)

// ControllerNode is one controller node's answer to GET_METADATA_INFO:
// whether it leads, who it says leads, and the broker groups as it has
// applied them (a follower may lag; replicas are Alive only in the
// leader's answer, which alone holds heartbeats).
type ControllerNode struct {
	Addr       string
	Err        error // the node could not be asked; the rest is unset
	IsLeader   bool
	LeaderAddr string
	Term       int64 // the node's raft term (0: not known)
	Groups     []protocol.ReplicaInfo
}

// ErrNoControllerLeader: no controller node asked says it leads.
var ErrNoControllerLeader = errors.New("wharf client: no controller node leads")

// ControllerNodes asks every controller of addrs (";"-separated, as
// --controllerAddr) for its metadata, in parallel, and returns the answers
// in the order of addrs. An unreachable node has Err set; the error is
// only for a bad list.
func ControllerNodes(ctx context.Context, addrs string, opts ...Option) ([]ControllerNode, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	list, err := parseNameServers(addrs)
	if err != nil {
		return nil, fmt.Errorf("%w: controller addresses: %w", ErrInvalidParameter, err)
	}
	out := make([]ControllerNode, len(list))
	var wg sync.WaitGroup
	for i, addr := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = askController(ctx, addr, &o)
		}()
	}
	wg.Wait()
	return out, nil
}

func askController(ctx context.Context, addr string, o *options) ControllerNode {
	n := ControllerNode{Addr: addr}
	c := newConn(addr, o, nil)
	defer c.close()
	var md protocol.ControllerMetadata
	if _, err := c.do(ctx, &protocol.GetControllerMetadataRequest{}, &md, o.timeout); err != nil {
		n.Err = fmt.Errorf("controller %s: %w", addr, err)
		return n
	}
	n.IsLeader, n.LeaderAddr, n.Term, n.Groups = md.IsLeader, md.LeaderAddr, md.Term, md.Groups
	return n
}

// ControllerMetadata returns the controller leader's view among addrs:
// its groups with the replicas' liveness. Without a node that says it
// leads, the error wraps ErrNoControllerLeader (and the nodes' errors).
func ControllerMetadata(ctx context.Context, addrs string, opts ...Option) (ControllerNode, error) {
	nodes, err := ControllerNodes(ctx, addrs, opts...)
	if err != nil {
		return ControllerNode{}, err
	}
	errs := []error{ErrNoControllerLeader}
	for _, n := range nodes {
		if n.Err == nil && n.IsLeader {
			return n, nil
		}
		if n.Err != nil {
			errs = append(errs, n.Err)
		}
	}
	return ControllerNode{}, errors.Join(errs...)
}
