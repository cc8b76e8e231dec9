// Package gate is the broker's acknowledgement gate: the one place that
// decides when a stored send is answered, and with which status.
//
// A send reaches the gate once the writer has appended it, as the log
// offset its data ends at. The gate answers it when what the broker's mode
// promises is true of that offset, and never before:
//
//	mode                          answered OK once            timeout status
//	ASYNC_FLUSH, *_MASTER async   at once                     -
//	SYNC_FLUSH                    flushed >= end              FLUSH_DISK_TIMEOUT (syncFlushTimeout)
//	SYNC_MASTER                   copies(end) >= inSyncReplicas FLUSH_SLAVE_TIMEOUT (slaveTimeout)
//	SYNC_MASTER + SYNC_FLUSH      both of the above           FLUSH_DISK_TIMEOUT if the flush is
//	                                                          missing, else FLUSH_SLAVE_TIMEOUT
//	controller mode               every id of the ack set     FLUSH_SLAVE_TIMEOUT (slaveTimeout),
//	                              acked end (+ the flush      FLUSH_DISK_TIMEOUT as above
//	                              under SYNC_FLUSH, and then
//	                              each member's copy counts
//	                              only once it is fsynced)
//
// where copies(end) counts the master and every slave that acknowledged
// end. A send that does not wait (WAIT=false, or oneway) is answered OK at
// once in every mode: the client chose not to wait for durability. Under
// SYNC_MASTER a send is answered SLAVE_NOT_AVAILABLE at once when fewer than
// inSyncReplicas copies are in sync (the data is stored on the master only).
// A failed fsync is sticky: every waiting and later flush waiter gets
// FLUSH_DISK_TIMEOUT ("durability unknown"). Stop answers every waiter with
// its mode's timeout status. A send is answered exactly once.
//
// The Gate is a plain state machine: no goroutines, no clock (time is an
// input), no I/O. Its inputs are Admit, Flushed, FlushFailed, Replicas,
// Tick and Stop; its output, drained with Ready, is the verdicts to send and
// the deadline at which Tick must next be called. Under controller mode
// (Mode.Controller) the ack set (SetAckSet: the SyncStateSet, unioned with
// a proposed one while a change is in flight) replaces inSyncReplicas: a
// send waits for each member by broker id (SlaveAcks), an empty set means
// the master alone, and there is no SLAVE_NOT_AVAILABLE at admission.
//
// Under controller mode the gate also gives the confirm offset (Confirm):
// how far the master and every member of the ack set hold the log as the
// mode requires (fsynced under SYNC_FLUSH, appended otherwise), never
// below the start of the master's epoch and never moving back. The
// master's consumers see nothing past it.
package gate
