package dashboard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// pool keeps one Admin per broker address and one for the name servers
// (key ""), dialled on first use and dropped after an error, so that a
// broker that comes back is dialled afresh rather than asked on a dead
// connection.
type pool struct {
	ns      string
	timeout time.Duration
	mu      sync.Mutex
	brokers map[string]*client.Admin // by address; "" the name servers'
}

func newPool(ns string, timeout time.Duration) *pool {
	return &pool{ns: ns, timeout: timeout, brokers: map[string]*client.Admin{}}
}

func (p *pool) options() []client.Option {
	return []client.Option{client.WithTimeout(p.timeout), client.WithDialTimeout(p.timeout),
		client.WithRetries(0), client.WithReconnectBackoff(100*time.Millisecond, time.Second)}
}

// names returns the name servers' Admin.
func (p *pool) names() (*client.Admin, error) {
	return p.get("", func() (*client.Admin, error) {
		a, err := client.NewAdmin("", append(p.options(), client.WithNameServer(p.ns))...)
		if err != nil {
			return nil, fmt.Errorf("name server %s: %w", p.ns, err)
		}
		return a, nil
	})
}

// broker returns addr's Admin.
func (p *pool) broker(addr string) (*client.Admin, error) {
	return p.get(addr, func() (*client.Admin, error) {
		a, err := client.NewAdmin(addr, p.options()...)
		if err != nil {
			return nil, fmt.Errorf("broker %s: %w", addr, err)
		}
		return a, nil
	})
}

// get returns the Admin of key ("" for the name servers), dialling it
// with dial outside the lock: a broker that does not answer costs its own
// callers the dial timeout, not everyone's.
func (p *pool) get(key string, dial func() (*client.Admin, error)) (*client.Admin, error) {
	p.mu.Lock()
	a := p.brokers[key]
	p.mu.Unlock()
	if a != nil {
		return a, nil
	}
	a, err := dial()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.brokers[key]; cur != nil { // dialled meanwhile by another caller
		a.Close()
		return cur, nil
	}
	p.brokers[key] = a
	return a, nil
}

// failed drops the Admin of addr ("" for the name servers) after err,
// when err says the connection rather than the request went wrong.
func (p *pool) failed(addr string, err error) {
	if err == nil || !connectionError(err) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.brokers[addr]; a != nil {
		a.Close()
		delete(p.brokers, addr)
	}
}

// connectionError: the answer, if any, says nothing about the request.
func connectionError(err error) bool {
	for _, e := range []error{client.ErrNotFound, client.ErrTopicNotExist, client.ErrTopicExist, client.ErrInvalidParameter} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, a := range p.brokers {
		a.Close()
		delete(p.brokers, key)
	}
}

// clusterInfo asks the name servers for every broker.
func (p *pool) clusterInfo(ctx context.Context) (protocol.ClusterInfo, error) {
	a, err := p.names()
	if err != nil {
		return protocol.ClusterInfo{}, err
	}
	ci, err := a.ClusterInfo(ctx)
	p.failed("", err)
	if err != nil {
		return protocol.ClusterInfo{}, fmt.Errorf("cluster info from %s: %w", p.ns, err)
	}
	return ci, nil
}

// readers picks one live broker per broker group: its master, else its
// lowest-id live slave; sorted by group name.
func readers(brokers []protocol.BrokerInfo) []protocol.BrokerRef {
	pick := map[string]protocol.BrokerRef{}
	var names []string
	for _, b := range brokers {
		if !b.Alive || b.BrokerAddr == "" {
			continue
		}
		cur, ok := pick[b.BrokerName]
		if !ok {
			names = append(names, b.BrokerName)
		}
		if !ok || b.BrokerID < cur.BrokerID {
			pick[b.BrokerName] = b.BrokerRef
		}
	}
	slices.Sort(names)
	out := make([]protocol.BrokerRef, 0, len(names))
	for _, n := range names {
		out = append(out, pick[n])
	}
	return out
}
