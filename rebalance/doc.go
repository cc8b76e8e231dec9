// Package rebalance is the consumer-group protocol as plain state machines,
// with time as an input: no goroutines, no clock reads, no I/O.
//
// A Coordinator is one group's side on the broker. Members join and stay
// with heartbeats (Heartbeat), leave (Leave) or fall silent (Tick removes a
// member silent for three heartbeat intervals). After every input the
// coordinator recomputes which member should consume each queue of the
// subscribed topics (and of the group's retry topic) with the group's
// allocation strategy, and returns a Ready: the assignment that answers the
// heartbeat, the members to notify (NOTIFY_CONSUMER_IDS_CHANGED), when to
// call Tick next, the group's summary, and the membership and owner changes
// for the log. The caller runs those outputs; the coordinator never does.
//
// The contract the coordinator keeps, in clustering mode:
//   - A queue moves in two steps. It leaves its old owner's assignment
//     first and reaches the new owner only once the old owner's heartbeat
//     echoes the revoking generation and no longer reports holding it, or
//     the old owner left or timed out. No two members are granted one queue
//     at once.
//   - Generations grow with every change of any assignment or revocation;
//     they start at the creation time in milliseconds times 1000, so a
//     coordinator created after a restart never reuses a generation members
//     echo from before it.
//   - For two heartbeat intervals after the broker booted (the members'
//     lease) the coordinator grants no queue nobody reports holding: it only
//     learns owners from the members' reports, since owners from before a
//     restart may still be consuming.
//   - Allocation is sticky: a queue's target owner changes only when it
//     must (the owner left, or holds more than its share).
//
// In broadcasting mode every subscriber is assigned every queue at once.
//
// A Member is one consumer's side: the push consumer of the client and the
// simulator's group members both run it. Its inputs are the heartbeat's
// life (HeartbeatSent, HeartbeatAnswered, HeartbeatFailed, ConnectionLost),
// the broker's NOTIFY_CONSUMER_IDS_CHANGED (Notified), the owner finishing
// a queue's release (Released), Tick and Close; each returns a MemberReady:
// queues to start (with the generation), to stop (revoked: commit, then
// release), to drop at once (lease lost), whether to heartbeat now with
// which Owned list and Generation, and when to call Tick. The contract the
// member keeps:
//   - One heartbeat is in flight at a time; the next regular one is due an
//     interval after the last ended (answered or failed). A notification, a
//     revoked queue's release or a lost connection asks for one at once,
//     sent when the one in flight ends. The broker's answer sets the
//     interval.
//   - The lease: a member consumes only while its last answered heartbeat
//     was sent at most two intervals ago. Past that every queue it
//     consumes is dropped, and an answer to a heartbeat sent longer ago
//     grants nothing. The coordinator removes a silent member only after
//     three intervals, so the member has stopped before its queues move.
//   - A revoked queue stays in Owned until Released, and the heartbeat
//     echoes the generation of the last assignment applied: together they
//     tell the coordinator the queue is free. A queue revoked and granted
//     again before its release restarts only after it.
//   - An answer to a heartbeat not in flight (failed, lost with its
//     connection, sent before Close) changes nothing; after Close the
//     member stops everything and acts on no answer.
//
// This package imports only the standard library and protocol, so the
// broker, the client and the simulator can all use it.
package rebalance
