// Package cq stores ConsumeQueues: the per topic-queue index into the
// CommitLog, in RocketMQ's on-disk format.
//
// Format:
//   - One entry (unit) is 20 bytes, big-endian: CommitLog offset int64, record
//     size int32, tags code int64 (see Entry, EntryAt, PutEntry). The entry of
//     queue offset q lives at byte q*20 of the queue.
//   - A queue is a directory (root/consumequeue/{topic}/{queueId}) of
//     fixed-size files of entriesPerFile*20 bytes (default 300,000 entries,
//     6,000,000 bytes), each named by the 20-digit zero-padded decimal byte
//     offset of its first entry. Files are created preallocated and
//     zero-filled, synced, and their directory entry synced, before use; they
//     are accessed through their mapping only.
//   - Valid entries have Offset >= 0 and Size > 0 (offset 0 is the first
//     message of the log). A queue that starts past offset 0 has its gap, in
//     the first file only, filled with Dummy entries (0, MaxInt32, 0), which
//     are below MinOffset and never returned. Entries strictly increase:
//     each entry's Offset is at least the previous entry's Offset+Size.
//
// Contract:
//   - Storage only: no goroutines, no clocks, all file access through
//     storage/vfs. A Queue has one owner; callers serialize every call.
//   - Written bytes are durable only after Flush, which syncs exactly the
//     range written or zeroed since the last Flush. A failed Flush is sticky.
//     File creations and removals are made durable (SyncDir) before the call
//     that makes them returns, one at a time, so a crash always leaves a
//     contiguous run of files.
//   - Open recovers from a crash: it scans the last files while units are
//     valid and strictly increasing and cuts everything after the first unit
//     that is not (zeros, garbage, a torn write). Recovery then truncates the
//     queue to the recovered CommitLog (TruncateByPhy) and re-dispatches;
//     Append is idempotent for entries already stored. The format has no
//     checksum: a write torn inside an entry's TagsCode leaves a valid-looking
//     entry with a wrong tag, which only a check of the last entries against
//     their CommitLog records (Get, then TruncateTo on a mismatch) can catch.
//   - Retention deletes whole files only, oldest first and never the last
//     (DeleteBefore); MinOffset moves to the first entry whose CommitLog
//     offset is still present. MaxOffset counts every entry ever written and
//     never decreases except by truncation.
//   - Inconsistencies are errors wrapping ErrCorrupt; reads below MinOffset
//     wrap ErrOffsetTooSmall. Every error names the queue directory.
package cq
