// Package storage is Wharf's persistent store: the segmented CommitLog
// (appended with pwrite, read through memory mappings), the per-queue
// ConsumeQueues that index it, the IndexFile for lookups by key, the
// checkpoint, abort and epoch files, crash recovery, truncation to a
// replica's common point, retention and the JSON config stores.
//
// Contract:
//   - Plain data structures. No goroutines, no actors, no clocks: callers pass
//     the current time in, and all file access goes through the vfs.FS seam so
//     the simulator and the crash tests can substitute their own disk.
//   - A Store has exactly one writer. Appends, flushes and recovery are not
//     safe for concurrent use; readers of immutable, already written ranges are.
//   - Nothing is acknowledged as durable that has not been synced: FlushedOffset
//     only moves after a successful sync, and a failed sync is sticky.
//   - Corruption in the middle of the log is reported with its offset
//     (ErrCorrupt), never silently truncated; only a torn tail after an unclean
//     stop is cut, and TruncateTo cuts a replica back to the point it shares
//     with a new master (CommonPoint of the epoch files), on request only.
//   - The epoch file (epochFileCheckpoint) is durable before an epoch's
//     first byte is appended, and never names bytes the log lacks: recovery
//     and TruncateTo drop entries that start beyond the log's end.
//
// Imports: std, golang.org/x/sys, and nothing above it in the layering of
// DESIGN.md (never actors, netio, sim or cmd).
package storage
