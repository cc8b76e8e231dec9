// Package sendpath holds the producer's send decisions as a plain core: no
// goroutines, no clock reads (every method takes now), no I/O. It says where
// an attempt goes, what its answer means and whether, when and where to try
// again; the caller does the sending and the waiting.
//
// The parts:
//
//   - Table: per topic the writable queues as (broker, queue) pairs with a
//     route version, the time it was fetched and a TTL. A route with an
//     older version than the one known is ignored, an equal or newer one
//     replaces it (keeping the round robin position). Queue choice is round
//     robin over the writable queues; an unknown topic (a route without
//     queues) gives queue -1, "the broker picks", which lets a broker with
//     autoCreateTopicEnable create it. The Table also holds the fault
//     latch: a broker whose attempt failed is avoided for Config.AvoidFor,
//     and one whose answer was slow (Table.Observe) for the time
//     Config.Latency gives that latency (RocketMQ's latency table,
//     DefaultLatency). A latch only ever extends; when it ends round
//     robin probes the broker back in. Stale makes a route due for a
//     fetch while keeping its queues (a broker of it broke its
//     connection).
//   - Classify: what an attempt's outcome means (stored; stored but the
//     flush or replication unconfirmed; retryable; failed for good).
//   - Send: the retry plan of one message (or one batch): attempts left,
//     exponential backoff, deadline, and the preference for another broker
//     than the one that failed last.
//
// One send, blocking or event-driven, is the same conversation:
//
//	s := table.Begin(topic, sendpath.AnyQueue, deadline)
//	step := s.Next(now)         // Fetch: get the route, s.Routed(route), s.Next again
//	...send the attempt to step.To...
//	d := s.Outcome(now, step.To, outcome)
//	// d.Verdict: Done (stored: never resend), Fail, or Retry: call
//	// s.Next(d.At) at d.At and go on.
//
// A failed route fetch is a failed attempt: its outcome goes to Outcome
// like an answer's. A blocking caller loops on the conversation, sleeping
// until d.At; an event-driven caller (the simulator) arms a timer for d.At
// and calls Next when it fires. The queue of a retry is picked then, not
// when the retry is decided: the route may have been forgotten or replaced
// in between, and a retry that never happens takes no turn of the round
// robin.
//
// Concurrency: a Table and its Sends are plain data. Calls on one Table or
// on any of its Sends must not run concurrently; a caller with several
// goroutines holds one lock around them (they do no I/O and are short).
// Two calls touch no Table state and need no lock: Begin, and Outcome with
// an outcome whose Class is Stored.
//
// Imports: std and protocol only.
package sendpath
