package actors

// Faults are planted bugs, one per class of invariant the simulator checks,
// so that it can prove it catches them (`wharf sim --bug NAME`). They reach
// a broker through Env.Faults, never through package state: two brokers in
// one process (a simulated cluster) can differ, and nothing in production
// sets them.
type Faults struct {
	// AckBeforeFlush: under SYNC_FLUSH, answer OK before the flush.
	AckBeforeFlush bool
	// NoFlushTimeout: never answer FLUSH_DISK_TIMEOUT; waiters wait for the fsync.
	NoFlushTimeout bool
	// CommitOffsetBeforePersist: acknowledge an offset commit before it is on disk.
	CommitOffsetBeforePersist bool
	// AckBeforeReplica: under SYNC_MASTER, answer OK before a slave has the bytes.
	AckBeforeReplica bool
	// DoubleAssign: the coordinator hands a queue to its new owner without
	// waiting for the old owner to release it.
	DoubleAssign bool
	// AsyncNeverFlush: under ASYNC_FLUSH, never flush on the interval.
	AsyncNeverFlush bool
	// ElectOutsideSyncStateSet: the controller leader elects a live replica
	// outside the SyncStateSet (controller.Faults).
	ElectOutsideSyncStateSet bool
	// ElectLackingReplica: the controller leader elects a SyncStateSet
	// member whose log may lack acknowledged messages while another
	// member is not heard from.
	ElectLackingReplica bool
	// NoLease: a controller-mode master keeps accepting writes after its
	// lease ran out (ctlagent.Config.NoLease).
	NoLease bool
	// AckOldSyncStateSet: a controller-mode master's gate ignores members
	// added to its ack set and goes on acknowledging against the set it
	// had (gate.Mode.AckOldSet), while the controllers applied the new one.
	AckOldSyncStateSet bool
	// SkipTruncation: a rejoining replica replicates past the point it
	// shares with its new master instead of cutting its log back there
	// (ha.FollowerConfig.SkipTruncation).
	SkipTruncation bool
}
