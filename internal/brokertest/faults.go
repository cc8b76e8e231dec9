package brokertest

import "github.com/wharfmq/wharf/protocol"

// The proxy's faults and counters. They apply to the clients' connections
// (through Addr), never to the helpers' own calls or to replication.

// Count is how many requests of code clients sent (stalled ones included).
func (b *Broker) Count(code protocol.Code) int {
	b.proxy.mu.Lock()
	defer b.proxy.mu.Unlock()
	return b.proxy.counts[code]
}

// PullCount is how many pulls of one queue clients sent.
func (b *Broker) PullCount(topic string, q int32) int {
	b.proxy.mu.Lock()
	defer b.proxy.mu.Unlock()
	return b.proxy.pulls[protocol.QueueRef{Topic: topic, QueueID: q}]
}

// Pending is how many requests of code the broker holds: forwarded to it
// and not yet answered (a long poll, a send waiting for its flush).
func (b *Broker) Pending(code protocol.Code) int {
	b.proxy.mu.Lock()
	defer b.proxy.mu.Unlock()
	return b.proxy.pending[code]
}

// Held is how many queues of topic have a pull held at the broker
// (forwarded and not yet answered): with long polling, the queues whose
// consumers have reached the end.
func (b *Broker) Held(topic string) int {
	b.proxy.mu.Lock()
	defer b.proxy.mu.Unlock()
	n := 0
	for q, c := range b.proxy.held {
		if q.Topic == topic && c > 0 {
			n++
		}
	}
	return n
}

// Heartbeats is how many HEART_BEAT requests clients sent.
func (b *Broker) Heartbeats() int { return b.Count(protocol.CodeHeartbeat) }

// SetStatusHook sets a hook asked for every request (n counts the
// requests of that code, from 1); nil removes it. A non-zero status
// answers the request instead of the broker, except that an unconfirmed
// status (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)
// for a send lets the broker store it and replaces the status of its
// successful answer.
func (b *Broker) SetStatusHook(h func(code protocol.Code, n int) protocol.Status) {
	b.proxy.mu.Lock()
	b.proxy.hook = h
	b.proxy.mu.Unlock()
}

// SetStall makes requests of code vanish (on): they never reach the
// broker and are never answered. Off lets later ones through again.
func (b *Broker) SetStall(code protocol.Code, on bool) {
	b.proxy.mu.Lock()
	b.proxy.stall[code] = on
	b.proxy.mu.Unlock()
}

// SetPullSuggestion forces the SuggestWhichBrokerID of every pull answer
// (1: read from a slave), as a master does for consumers far behind.
func (b *Broker) SetPullSuggestion(brokerID int64) {
	b.proxy.mu.Lock()
	b.proxy.suggest, b.proxy.suggested = brokerID, true
	b.proxy.mu.Unlock()
}

// SendBacks are the CONSUMER_SEND_MSG_BACK requests clients sent.
func (b *Broker) SendBacks() []protocol.ConsumerSendMsgBackRequest {
	b.proxy.mu.Lock()
	defer b.proxy.mu.Unlock()
	return append([]protocol.ConsumerSendMsgBackRequest(nil), b.proxy.sendBacks...)
}
