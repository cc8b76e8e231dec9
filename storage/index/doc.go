// Package index is Wharf's IndexFile: it finds the CommitLog physical offsets
// of messages by key ("topic#key") and store-time range, with RocketMQ's
// on-disk layout, so that files written by one are readable by the other.
//
// # Layout
//
// An index directory (root/index) holds files named by the store timestamp of
// their first entry, formatted as UTC yyyyMMddHHmmssSSS. Every file has the
// same size, 40 + SlotNum*4 + IndexNum*20 bytes (420,000,040 with the
// defaults), is created preallocated and zero-filled, and is memory-mapped.
// All integers are big-endian:
//
//	header (40 B)  beginTimestamp int64 @0   store ms of the first entry
//	               endTimestamp   int64 @8   greatest store ms of any entry
//	               beginPhyOffset int64 @16  phy offset of the first entry
//	               endPhyOffset   int64 @24  phy offset of the last entry
//	               hashSlotCount  int32 @32  number of non-empty slots
//	               indexCount     int32 @36  next entry number; starts at 1
//	slots          SlotNum x int32           newest entry number of the slot, 0 = empty
//	entries        IndexNum x 20 B           [keyHash int32][phyOffset int64]
//	                                         [timeDiff int32][prevIndex int32]
//
// keyHash is abs(Java String.hashCode(key)) (0 for Integer.MIN_VALUE), the slot
// is keyHash % SlotNum, timeDiff is the entry's store time in whole seconds
// after beginTimestamp, clamped to [0, MaxInt32], and prevIndex chains the
// entries of one slot newest first (0 ends the chain). Entry number 0 is never
// used, so a file holds IndexNum-1 entries; a full file rolls to a new one.
//
// # Contract
//
//   - One owner. An Index is a plain data structure: no goroutines, no clocks
//     (Put takes the message's store timestamp), no locks. Put, Query, Flush,
//     TruncateAfter, DeleteBefore and Close must not be called concurrently.
//   - Put(key, phy, ts) is idempotent for a rebuild: phy offsets below
//     MaxPhyOffset are ignored, and a key already indexed for the message at
//     MaxPhyOffset (several keys share one message's offset) is not added
//     twice. Offsets must therefore be put in non-decreasing order.
//     PutHash(KeyHash(topic, key), phy, ts) is Put(KeyOf(topic, key), phy,
//     ts) from the key's parts: an entry keeps only the hash.
//   - Query returns phy offsets newest first (newest file first, then down a
//     slot's chain). Matching is on the key's hash only: different keys may
//     collide, so the caller re-checks the key on the loaded messages. Time is
//     stored at one-second resolution relative to the file's begin: an entry
//     matches when the second it was stored in overlaps [begin, end], so a
//     result may lie up to 999 ms outside the range but none inside it is
//     missed (RocketMQ compares the truncated time, and can miss). The chain
//     walk stops at the first entry older than begin (store timestamps are
//     assumed non-decreasing within a file, as RocketMQ does).
//   - Durability goes through the vfs.FS seam: a new file is created with its
//     final size and its directory entry synced before any entry is written;
//     entries become durable only when Flush returns nil. A failed sync is
//     sticky: every later Flush returns it. Close releases the mappings and
//     does not sync; call Flush first.
//   - Recovery: entries cannot be removed from the chains cheaply, so
//     TruncateAfter(phy) deletes every file that holds an entry at or after
//     phy (beginPhyOffset >= phy, or the file straddling it, whose
//     endPhyOffset >= phy: endPhyOffset is the offset of its last message,
//     which the cut removed when equal) and returns rebuildFrom, the
//     straddling file's beginPhyOffset, from which the caller must Put the
//     surviving messages again (-1: nothing to rebuild).
//   - After an unclean stop, what was put since the last successful Flush
//     may be lost, half written, or have overwritten slots of older entries.
//     The recipe (TestCrashRecovery): record F = MaxPhyOffset() after each
//     successful Flush; at recovery call TruncateAfter(F) - it deletes every
//     file written since that Flush - and re-put the CommitLog's messages
//     from rebuildFrom (from F when it is -1). The idempotence rule absorbs
//     the overlap. Open reports ErrCorrupt only for a header that is
//     inconsistent, which a torn header sector could make; the caller then
//     removes the directory and rebuilds everything.
//   - Retention: DeleteBefore(minPhy) removes whole files whose
//     endPhyOffset < minPhy, never the newest.
//   - Corruption is reported, never trusted: Open rejects a file whose size or
//     header is inconsistent with an error wrapping ErrCorrupt, and Query
//     tolerates garbage inside a consistent file (slots or prevIndex values
//     out of range, cycles): a chain is walked only while entry numbers
//     strictly decrease, at most indexCount steps, and nothing is allocated in
//     proportion to what a header claims.
//
// Imports: std and storage/vfs only.
package index
