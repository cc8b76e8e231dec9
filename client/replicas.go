package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// replicas is a consumer's view of one broker group: the master and the
// slaves of WithSlaveAddrs. It picks the broker of each read (see
// WithSlaveAddrs) and fails over to the next one when a broker cannot be
// reached. Without slaves every call goes to the master unchanged.
type replicas struct {
	o      *options
	master *conn
	slaves []*conn

	mu        sync.Mutex
	downUntil time.Time         // the master is not tried before then (zero: it is up)
	onSlave   map[queueRef]bool // queues whose pulls go to a slave (the master suggested it)
}

type queueRef struct {
	topic string
	queue int32
}

// laggingSlaveWait is the pause before answering PullNoNewMsg for a pull
// beyond a lagging slave's end of the queue, so a consumer does not spin.
const laggingSlaveWait = 100 * time.Millisecond

func newReplicas(addr string, o *options, hello func() protocol.Request) *replicas {
	r := &replicas{o: o, master: newConn(addr, o, hello), onSlave: map[queueRef]bool{}}
	for _, a := range o.slaveAddrs {
		r.slaves = append(r.slaves, newConn(a, o, hello))
	}
	return r
}

// connect connects to the master now; if it cannot be reached, to the
// first slave that can (and the master counts as down). It fails with the
// master's error if no broker answers.
func (r *replicas) connect(ctx context.Context) error {
	err := r.master.connect(ctx)
	if err == nil || len(r.slaves) == 0 || !errors.Is(err, ErrBrokerUnavailable) {
		return err
	}
	for _, s := range r.slaves {
		if s.connect(ctx) == nil {
			r.masterDown(err)
			return nil
		}
	}
	return err
}

func (r *replicas) close() {
	r.master.close()
	for _, s := range r.slaves {
		s.close()
	}
}

// masterDown notes that the master could not be reached: it is not tried
// again for masterRetry.
func (r *replicas) masterDown(err error) {
	r.mu.Lock()
	was := !r.downUntil.IsZero()
	r.downUntil = time.Now().Add(r.o.masterRetry)
	r.mu.Unlock()
	if !was {
		r.o.logger.Warn("wharf client: master unreachable; reading from its slaves", "master", r.master.addr,
			"slaves", r.o.slaveAddrs, "retry_every", r.o.masterRetry, "err", err)
	}
}

// masterUp notes that the master answered.
func (r *replicas) masterUp() {
	r.mu.Lock()
	was := !r.downUntil.IsZero()
	r.downUntil = time.Time{}
	r.mu.Unlock()
	if was {
		r.o.logger.Info("wharf client: master reachable again; reading from it", "master", r.master.addr)
	}
}

// isDown reports whether the master is being avoided.
func (r *replicas) isDown() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.downUntil.IsZero() && time.Now().Before(r.downUntil)
}

func (r *replicas) setOnSlave(q queueRef, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.onSlave[q] = true
	} else {
		delete(r.onSlave, q)
	}
}

// order returns the brokers to try, in order, and whether the master is
// down. preferSlave puts the slaves first even when the master is up.
func (r *replicas) order(preferSlave bool) ([]*conn, bool) {
	if len(r.slaves) == 0 {
		return []*conn{r.master}, false
	}
	down := r.isDown()
	out := make([]*conn, 0, 1+len(r.slaves))
	if down || preferSlave {
		out = append(out, r.slaves...)
		return append(out, r.master), down
	}
	out = append(out, r.master)
	return append(out, r.slaves...), down
}

// failover reports whether a call that failed with err should be tried on
// the next broker.
func failover(ctx context.Context, err error) bool {
	return ctx.Err() == nil && errors.Is(err, ErrBrokerUnavailable) && !errors.Is(err, ErrClosed)
}

// do runs a call that is not a pull (offset queries and commits, topic
// lookups) on the master or, while it is down, on a slave.
func (r *replicas) do(ctx context.Context, call func(*conn) error) error {
	brokers, _ := r.order(false)
	var firstErr error
	for _, c := range brokers {
		err := call(c)
		if err == nil || !failover(ctx, err) {
			if c == r.master && err == nil {
				r.masterUp()
			}
			return err
		}
		if c == r.master {
			r.masterDown(err)
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// pull reads one queue from the broker the routing rules pick.
func (r *replicas) pull(ctx context.Context, group, topic string, queueID int32, offset int64, maxNums int32, opts PullOptions) (PullResult, error) {
	if len(r.slaves) == 0 {
		return pull(ctx, r.master, group, topic, queueID, offset, maxNums, opts)
	}
	ref := queueRef{topic, queueID}
	r.mu.Lock()
	suggested := r.onSlave[ref]
	r.mu.Unlock()
	brokers, down := r.order(suggested)
	var firstErr error
	for _, c := range brokers {
		isSlave := c != r.master
		o := opts
		if isSlave && down && o.Suspend > r.o.masterRetry {
			o.Suspend = r.o.masterRetry // come back in time to try the master
		}
		res, err := pull(ctx, c, group, topic, queueID, offset, maxNums, o)
		if err != nil {
			if failover(ctx, err) {
				if c == r.master {
					r.masterDown(err)
				}
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if isSlave && !down && errors.As(err, new(*StatusError)) {
				// The slave cannot serve this queue (a topic not yet
				// replicated, say): read it from the master again.
				r.setOnSlave(ref, false)
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			return res, err
		}
		if !isSlave {
			r.masterUp()
			if res.SuggestWhichBrokerID > 0 {
				if !suggested {
					r.o.logger.Debug("wharf client: master suggests reading from a slave", "topic", topic, "queue", queueID,
						"offset", offset, "max", res.MaxOffset)
				}
				r.setOnSlave(ref, true)
			} else if suggested {
				r.setOnSlave(ref, false)
			}
			return res, nil
		}
		if res.Status == protocol.PullOffsetIllegal && res.MaxOffset < offset {
			// The slave has not yet received what the consumer read
			// elsewhere: wait for it rather than going back.
			if !sleep(ctx, laggingSlaveWait) {
				return PullResult{}, fmt.Errorf("wharf client: pull from %s: %w", c.addr, ctx.Err())
			}
			res = PullResult{Status: protocol.PullNoNewMsg, NextBeginOffset: offset, MinOffset: res.MinOffset,
				MaxOffset: res.MaxOffset, BrokerAddr: res.BrokerAddr}
		}
		if suggested && (res.Status == protocol.PullNoNewMsg || res.NextBeginOffset >= res.MaxOffset) {
			r.setOnSlave(ref, false) // caught up: the master serves it from memory again
		}
		return res, nil
	}
	return PullResult{}, firstErr
}
