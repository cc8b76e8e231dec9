// Package actors holds the broker's behaviour as protoactor-go actors: the
// supervisor, the CommitLogWriter, the FlushActor, one DispatchActor per
// ConsumeQueue, the IndexActor, topic and consumer-offset managers, and later
// replication and rebalancing.
//
// Contract: actors are thin shells over plain state machines. They reach time,
// disk, network and scheduling only through the four seams (Clock, FS,
// Transport, Dispatcher), never through time.Now, os, net or RequestFuture, so
// the simulator can run them deterministically. Each piece of state has one
// owner actor; there are no locks around actor state.
//
// Imports: protocol, storage, protoactor. Never netio, gnet or sim.
package actors
