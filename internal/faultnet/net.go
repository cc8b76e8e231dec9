package faultnet

import (
	"errors"
	"fmt"
	"sync"
)

// Net is the links between named nodes, made on demand.
type Net struct {
	mu    sync.Mutex
	links map[[2]string]*Link // (from, to) -> link
	order []*Link
}

// NewNet returns an empty set of links.
func NewNet() *Net { return &Net{links: map[[2]string]*Link{}} }

// Link returns the link from node from to node to, whose connections go
// to target; the first call for a pair starts it (later calls with another
// target are an error).
func (n *Net) Link(from, to, target string) (*Link, error) {
	return n.LinkOn(from, to, "127.0.0.1:0", target)
}

// LinkOn is Link listening on listen (NewLinkOn) when it starts the link;
// a later call for the pair must name the same target.
func (n *Net) LinkOn(from, to, listen, target string) (*Link, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [2]string{from, to}
	if l := n.links[k]; l != nil {
		if l.target != target {
			return nil, fmt.Errorf("faultnet: link %s->%s goes to %s, not %s", from, to, l.target, target)
		}
		return l, nil
	}
	l, err := NewLinkOn(from+"->"+to, listen, target)
	if err != nil {
		return nil, err
	}
	n.links[k] = l
	n.order = append(n.order, l)
	return l, nil
}

// Partition partitions the links between a and b, both ways; it returns
// how many there are.
func (n *Net) Partition(a, b string) int {
	count := 0
	for _, l := range n.between(a, b) {
		l.Partition()
		count++
	}
	return count
}

// Heal heals the links between a and b, both ways.
func (n *Net) Heal(a, b string) {
	for _, l := range n.between(a, b) {
		l.Heal()
	}
}

// HealAll heals every link.
func (n *Net) HealAll() {
	for _, l := range n.all() {
		l.Heal()
	}
}

func (n *Net) between(a, b string) []*Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*Link
	for _, k := range [][2]string{{a, b}, {b, a}} {
		if l := n.links[k]; l != nil {
			out = append(out, l)
		}
	}
	return out
}

func (n *Net) all() []*Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Link(nil), n.order...)
}

// Close closes every link.
func (n *Net) Close() error {
	var errs []error
	for _, l := range n.all() {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}
