package dispatch

import (
	"errors"

	"github.com/wharfmq/wharf/storage"
)

// Drops is the Reput actor's side of deleting topics: which queue owners
// are dropping their ConsumeQueues, what waits for the fresh owner of each
// (a queue's directory cannot have two owners), and when a topic's
// deletion is complete.
//
// While any queue is being dropped, no checkpoint may start: the entries
// held for fresh owners are in no ConsumeQueue yet, and a checkpoint
// covering their records would lose them at a crash.
type Drops struct {
	queues map[storage.QueueKey][]any // dropping -> messages for the fresh owner, in order
	topics map[string]*topicDrop
}

type topicDrop struct {
	left int // its queues still being dropped
	errs []error
}

// Done is a topic whose deletion completed (Err: some queue could not be
// dropped).
type Done struct {
	Topic string
	Err   error
}

// NewDrops returns an empty Drops.
func NewDrops() *Drops {
	return &Drops{queues: map[storage.QueueKey][]any{}, topics: map[string]*topicDrop{}}
}

// Cut starts the deletion of topic. owned are the keys of its queues that
// have an owner; Cut returns those the shell must tell to drop (the others
// are dropping already), and the topic as Done at once if nothing is left
// to drop.
func (d *Drops) Cut(topic string, owned []storage.QueueKey) (drop []storage.QueueKey, done []Done) {
	td := d.topics[topic]
	if td == nil {
		td = &topicDrop{}
		d.topics[topic] = td
	}
	for _, k := range owned {
		if _, dropping := d.queues[k]; dropping || k.Topic != topic {
			continue
		}
		d.queues[k] = nil
		td.left++
		drop = append(drop, k)
	}
	if td.left == 0 {
		delete(d.topics, topic)
		done = append(done, Done{Topic: topic})
	}
	return drop, done
}

// Hold keeps msg for k's fresh owner if k's queue is being dropped, and
// reports whether it did.
func (d *Drops) Hold(k storage.QueueKey, msg any) bool {
	held, dropping := d.queues[k]
	if dropping {
		d.queues[k] = append(held, msg)
	}
	return dropping
}

// Dropped: k's owner dropped its queue (err: it could not) and is gone.
// It returns what was held for k's fresh owner, in order, and the topic as
// Done if this was its last queue.
func (d *Drops) Dropped(k storage.QueueKey, err error) (held []any, done []Done) {
	held, dropping := d.queues[k]
	if !dropping {
		return nil, nil
	}
	delete(d.queues, k)
	td := d.topics[k.Topic]
	if td == nil {
		return held, nil
	}
	if err != nil {
		td.errs = append(td.errs, err)
	}
	if td.left--; td.left == 0 {
		delete(d.topics, k.Topic)
		done = append(done, Done{Topic: k.Topic, Err: errors.Join(td.errs...)})
	}
	return held, done
}

// Busy reports whether a queue is being dropped (no checkpoint may start).
func (d *Drops) Busy() bool { return len(d.queues) > 0 }
