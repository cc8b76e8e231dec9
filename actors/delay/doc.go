// Package delay holds delayed delivery and retries as plain code: the
// scheduler that moves due delayed messages from the schedule topic into
// their real topic, and the decision where a message given back by a
// consumer (CONSUMER_SEND_MSG_BACK) goes next.
//
// Delayed messages wait in storage.ScheduleTopic: queue level-1 for a delay
// level (each such queue is in delivery order, as every message of it got
// the same delay), queue len(levels) for absolute delivery times (in any
// order). A ConsumeQueue entry's tags code there is the delivery time, Unix
// ms. The Scheduler finds due messages by those entries, has them re-stored
// in their real topic and queue, and records its progress per queue in
// delayOffset.json only once the re-stored copies are flushed, so a delayed
// message survives a restart (at worst it is delivered twice).
//
// Contract: the Scheduler takes inputs (the time, the log's flushed offset,
// the schedule queues' ends, scanned entries, write outcomes) and collects
// outputs until the caller takes them with Ready: scans to run, batches to
// re-store, progress to write. It has no goroutines, no clock and no I/O,
// and is not safe for concurrent use. Decide and Unwrap are pure functions.
//
// Imports: protocol, storage.
package delay
