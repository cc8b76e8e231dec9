// Package client is the Go client library for Wharf: Producer, PullConsumer,
// PushConsumer and Admin. It speaks the protocol package's wire format over
// plain net.Conn so it runs on every OS.
//
// Each client value owns one TCP connection to one broker, on which requests
// are multiplexed by opaque id (one writer and one reader goroutine), so a
// long-polling pull never holds up other calls. When the connection breaks,
// every call waiting on it fails at once with ErrBrokerUnavailable; the next
// call connects again (after a short backoff if the last attempt failed).
//
// Every call takes a context. Its deadline and WithTimeout both bound a
// request; when one expires the call fails with an error matching both
// ErrTimeout and context.DeadlineExceeded (the broker may still execute the
// request). For a pull the timeout is the suspend time plus WithTimeout, so a
// context deadline must exceed the suspend time.
//
// Broker statuses come back as *StatusError, which matches the sentinel of
// its status with errors.Is (ErrTopicNotExist, ErrFlushDiskTimeout, ...).
// A send the broker stored without confirming its flush or replication
// (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is never
// retried: Send returns the full SendResult with that Status together with
// the error.
//
// Producer.SendAsync coalesces: the async sends to one topic that arrive
// while the connection is busy writing go out together as one
// SEND_BATCH_MESSAGE to one queue (picked round robin per batch), and each
// callback still gets its own message's id, queue and offset. Nothing waits
// for a batch to fill, and none grows past 64 KiB while the connection is
// idle: the SendAsync that fills it writes it. A refused batch is sent again message by message, so
// one bad message cannot fail the others. WithSendCoalescing(false) turns
// it off.
//
// Close on any client value fails its calls in flight with ErrClosed and
// returns after all its goroutines have ended.
//
// The transport is a seam: WithDialer replaces the net.Dialer that opens
// every connection (to the broker and to WithSlaveAddrs' slaves) with any
// function returning a net.Conn: in-memory connections for tests
// (net.Pipe), a proxy that injects faults or latency, a simulated network.
//
// The producer's decisions (queue choice, what an answer means, whether,
// when and where to retry) are a plain core, package client/sendpath, with
// time as an input and no goroutines: Producer drives it with blocking
// calls, and an event-driven caller such as the simulator drives the same
// core from its answers and timers.
//
//	p, err := client.NewProducer("127.0.0.1:10911")
//	if err != nil { ... }
//	defer p.Close()
//	m := &protocol.Message{Topic: "orders", Body: []byte("hello")}
//	m.SetTags("new")
//	m.SetKeys("order-42")
//	res, err := p.Send(ctx, m)
//
//	c, err := client.NewPushConsumer("127.0.0.1:10911", "billing", client.WithConsumeFrom(client.ConsumeFromFirst))
//	c.Subscribe("orders", "new || paid", func(ctx context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
//		... return client.ConsumeSuccess
//	})
//	err = c.Start(ctx)
//	...
//	c.Close() // stops the handlers and commits the offsets
//
// A PushConsumer is a member of its consumer group: the broker's
// RebalanceCoordinator assigns it queues through its heartbeats (every
// member gets every queue with WithMessageModel(Broadcasting)), and it hands
// a revoked queue over promptly after committing its offset. ConsumeRetryLater
// (or a handler call beyond WithAckTimeout) gives a message back; the broker
// redelivers it through the group's retry topic with growing delays and, after
// WithMaxReconsumeTimes, moves it to the dead-letter topic %DLQ%<group>.
// WithConsumeOrderly consumes each queue in order, one message at a time.
// Admin.ListGroups and Admin.DescribeGroup show the groups, their members,
// assignment and lag. WithDelayLevel and WithDeliverAt delay a send.
//
// # Clusters: name-server routes
//
// WithNameServer("a:9876;b:9876") with an empty broker address is the
// normal way to use a cluster of broker groups; a broker address still
// works for one group. A Producer on name-server routes:
//
//   - asks any live name server for a topic's route (GET_ROUTEINFO_BY_TOPIC)
//     and sticks to that server while it answers, moving to the next one
//     in the list when it cannot be reached;
//   - sends round robin over the writable queues of every group whose
//     master is alive and whose permission allows writes, each queue
//     keyed by its master's address; a group without a live master is
//     skipped (its queues are for consumers, on its slaves);
//   - keeps one connection per broker it sends to, made when first used;
//   - fetches its routes again every WithRouteRefresh (2 s), at once when
//     a connection to a broker breaks (and once more 250 ms later, in
//     case the name server learns of the death a moment after the
//     client), when a broker answers TOPIC_NOT_EXIST, and before every
//     attempt while the route has no writable queue;
//   - never goes back to an older route: a route's version is compared
//     only with the versions taken from the same name server (each server
//     numbers its own table's changes, and two servers' numbers say
//     nothing about each other), so a late answer or a restarted server
//     cannot take it back. Moving to another server (the one asked is
//     gone) takes that server's route as it is: independent name servers
//     that missed a registration can differ, and the client then acts on
//     the view of the one it can reach;
//   - avoids faulty brokers by default: a broker whose attempt failed
//     (a retryable status, a broken connection, a timeout) is skipped
//     for WithRouteRefresh + 1 s, long enough for a refresh to drop a
//     dead one; a broker whose answer took 550 ms or more is skipped for
//     2 s to 30 s (RocketMQ's latency table, sendpath.DefaultLatency).
//     Skipping only applies while another broker has writable queues;
//     when it ends, round robin probes the broker back in. A failed send
//     is retried (WithRetries, within the context's deadline) on another
//     broker than the one that failed; never when the broker stored the
//     message without confirming it.
//
// ToQueue and WithQueue name a queue of one broker: on name-server routes
// a send with them fails with ErrInvalidParameter.
//
// A PushConsumer on name-server routes is a member of its consumer group
// on every broker group hosting its topics (each broker's coordinator
// assigns its own queues; the consumer consumes all it is given), on the
// group's master with the group's slaves to read from while the master is
// gone, offsets kept; broker groups that appear later are joined within
// WithRouteRefresh. BrokerGroups gives each group's member.
//
// A PullConsumer on name-server routes names a queue by broker group,
// topic and queue id (MessageQueue): Queues lists a topic's readable
// queues over every group hosting it, PullQueue, CommitQueueOffset,
// QueryQueueOffset and QueueOffsets take one. Each group is read from its
// master, or from its slaves (as the routes name them) while the master
// is gone; offsets committed meanwhile go to a slave, which hands them on
// to the master, and commits go to the master again once it answers. The
// calls that take a topic and a queue id work while one group hosts the
// topic.
//
// A TOPIC_NOT_EXIST from one name server is not taken as the topic's end:
// the client asks the other servers, takes the first route one has, and
// keeps a route it holds unless every name server says the topic is gone.
//
// An Admin with WithNameServer gets ClusterInfo (GET_BROKER_CLUSTER_INFO),
// TopicRoute and CreateTopicInCluster (the topic on every live master of
// a cluster).
//
// Imports: protocol and rebalance (plus std), and its own client/sendpath.
package client
