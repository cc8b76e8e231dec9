// Package jepsen records what clients did to a broker cluster under faults
// and checks the record, in the manner of Jepsen's queue checkers.
//
// A History is the record: every send's invocation and completion (its
// key, its outcome and, when acknowledged, the queue position the broker
// gave it) and every message a reader saw (which replica served it, its
// queue position and its key). Recording is safe from many goroutines; the
// order of recording is the history's order.
//
// Check turns a history into a Result: a Summary (acked, failed,
// indeterminate, read) and the anomalies, under Jepsen's names:
//
//   - lost-write: a send acknowledged as SEND_OK whose key no reader saw.
//   - duplicate: one key seen at two queue positions.
//   - inconsistent-offsets: one queue position holding two keys (two
//     replicas disagree, or a read disagrees with the position an
//     acknowledgement promised).
//   - nonmonotonic: one reader's offsets in one queue not strictly
//     increasing.
//   - G1a: a key seen whose send the broker definitely refused (a status
//     that says nothing was stored).
//   - unexpected: a key seen that no one sent.
//
// A send whose outcome is indeterminate (a timeout, a broken connection, a
// status that says "stored, not confirmed", or no completion at all) may or
// may not be stored: seeing it is counted in Result.UnackedRead for
// information and is never an anomaly, and not seeing it is not a loss.
//
// Positions are per broker group (Queue.Group), not per replica: a master
// and its slaves hold the same log, so the same key at the same position on
// two replicas is one position, and two keys there are an anomaly.
//
// Between narrows a history to a window (the sends invoked after one mark,
// completed before another, and chosen reads), for checks of what held at
// one moment, such as "every send acknowledged during the partition is on
// a slave read during it".
//
// CheckMasters checks acknowledgements against "at most one master
// accepting acknowledged writes per epoch" (controller mode): each Ack
// names the broker that gave it and that broker's master epoch, and two
// brokers acknowledging in one epoch (multiple-masters), or an ack of an
// epoch for a send invoked after a newer epoch's first ack (stale-master),
// is an anomaly.
//
// The package stamps records with time.Now unless History.Clock says
// otherwise (the stamps are for people: Check goes by the record order),
// starts no goroutine and does no I/O. Imports: std only.
package jepsen
