// Package actors holds the broker's behaviour: plain state machines
// (the sub-packages), each inside a thin protoactor actor (this package).
//
// # Contract
//
// A core is a plain Go type: no goroutines, no clock reads (time is an
// input), no actor.Context, no sockets; inputs in, a Ready-style value out
// (answers, timers to arm, I/O to run, messages for other actors). Cores
// are tested on their own, in microseconds. An actor here is a short shell:
// it feeds its core, runs what the core asks through the four seams (Clock,
// FS, Transport, Dispatcher: Env), and forwards the outputs. Shells are
// handed a *kit (answering, timers, background I/O, logging, planted
// faults), their core's narrow dependencies, *pids (the other actors) and
// *views (state published by its one owner for readers on other
// goroutines); never the Broker. Each piece of state has one owner actor;
// there are no locks around actor state.
//
// Answers are typed (Response, Records): the connection's codec (netio
// holds Wharf's) encodes them, so a listener with another codec serves the
// same actors. No actor encodes a frame.
//
// # Who decides what
//
//	file            actor            core (package)        decides
//	broker.go       (transport)      -                     routing of a read burst; answers from published views
//	writer.go       writer           writer.Writer         topic check, queue choice, delay diversion, the append;
//	                                 gate.Mode.Waits       which sends are answered at once (the rest: the gate)
//	replication.go  writer           ha.Follower           a slave's link: dial, append the master's bytes, report
//	durability.go   durability       flush.Policy          when to fsync (group commit, or interval)
//	                                 gate.Gate             when a waiting send is answered, and with which status (the ack set in controller mode); the confirm offset
//	                                 ha.Replicator         a master's slaves: divergence check, streaming, acks
//	role.go         role             validRole             the broker's role; runs the delay scheduler on a master
//	reput.go        reput            dispatch.Reput        what is visible (controller mode: below the confirm offset), which queue gets which record, checkpoints
//	dispatch.go     dispatch (1/q)   dispatch.Queue        pulls, long polls, read checks (dispatch.Topics), SEARCH_OFFSET_BY_TIMESTAMP
//	index.go        index            dispatch.Index/Query  index flush cadence, QUERY_MESSAGE limits
//	topics.go       topics           meta.Topics           the topic table, topics.json
//	deltopic.go     writer, reput    storage.Deleted       a deleted topic's watermark, its queues dropped
//	offsets.go      offsets          meta.Offsets          consumer offsets, consumerOffset.json, commit acks
//	groups.go       groups (1/group) rebalance.Coordinator membership, allocation, hand-over
//	clientgroups.go groups           clientgroups.Table    client-coordinated groups (RocketMQ's clients): members, expiry, notices, queue locks; refusing a group of both kinds
//	scheduler.go    scheduler        delay.Scheduler       re-storing due delayed messages, delayOffset.json
//	retry.go        (transport)      delay.Decide          CONSUMER_SEND_MSG_BACK: retry topic or dead letters
//	registrar.go    registrar        register.Registrar    registering with the name servers: when, what, backoff, unregister
//	ctlclient.go    ctlclient        ctlagent.Agent        controller mode: role to take, master lease, SyncStateSet, ack set
//	namesrv.go      (name server)    namesrv.Table         the name server's routes, leases, data versions
//	controller_*.go raft (controller) raftnode.Node        the controller's raft: elections, log, ReadIndex
//	                                 controller.State/Core the replicated broker groups; elections, set changes, reads
//	-               supervision      supervise             restart budget on the Clock; Env.Fatal beyond it
//
// The writer is the one appender of the CommitLog in every role: a
// master's writer appends sends, a slave's its master's bytes; it runs
// retention. Bursts of sends reach it through a queue (sendQueue), not a
// mailbox message each, so that every burst that arrived while it ran is
// appended, handed to the durability actor and answered as one batch; a
// batch's answers to one connection leave in one writev (Cork).
//
// The durability actor owns what makes an append durable and the answer
// to every send that waits for it: the flushed offset, the
// slaves' acknowledgements and the gate all live there (no cross-actor
// atomics), and its mailbox holds fsync completions and slaves' reports,
// not sends, so a group commit or a slave's acknowledgement is answered
// without queueing behind appends. (Hosting gate and replication in the
// writer saved a hop but cost SYNC_FLUSH-64 a tenth and sync-master-64 a
// third of its throughput on two cores: docs/BENCHMARKS.md.)
//
// Imports: protocol, storage, rebalance, internal/invariant, protoactor.
// Never netio, gnet or sim (internal/archtest holds it).
package actors
