// Package clientgroups is the broker's table of client-coordinated
// consumer groups: the groups of clients that allocate queues themselves
// (RocketMQ 4's clients), beside Wharf's server-side coordinator
// (package rebalance).
//
// # Contract
//
// A Table is a plain value with no goroutines and no clock: every input
// carries its time. It keeps, per group, the members a heartbeat named
// (client id, connection id, subscriptions, last heartbeat) and answers
// who the live members are (GET_CONSUMER_LIST_BY_GROUP). A member is gone
// MemberExpiry after its last heartbeat (RocketMQ's channel expiry), at
// once when it unregisters or its connection closes. Every change of a
// group's member set is a Notice: the connections of the group's members
// as they are after the change, each to be sent
// NOTIFY_CONSUMER_IDS_CHANGED so that they allocate again at once.
//
// The table also holds orderly consumers' queue locks (LOCK_BATCH_MQ,
// UNLOCK_BATCH_MQ): a queue of a group is held by one client until it
// unlocks it or LockExpiry passes without the client locking it again
// (RocketMQ's REBALANCE_LOCK_MAX_LIVE_TIME). Locks outlive members, as in
// RocketMQ: a consumer whose connection broke may still be consuming, and
// its lock keeps another from taking the queue until it has expired.
//
// Connections are ids here: the shell that owns the table maps them to
// connections. One owner feeds a Table; it has no locks of its own.
package clientgroups
