package sendpath

import "github.com/wharfmq/wharf/protocol"

// Failure says how an attempt ended when it did not end with an answer.
type Failure int

const (
	// Answered: the broker answered, with Outcome.Status.
	Answered Failure = iota
	// Broken: the connection could not be made or broke before the answer
	// came. Such an attempt is retried: the message may or may not have
	// been stored, as with any send whose answer was lost, and a refused
	// connection (the common case) stored nothing.
	Broken
	// TimedOut: the answer did not come in time. The broker may still
	// store the message, so it is not resent.
	TimedOut
	// Local: the attempt failed on this side (the client was closed, the
	// caller's context ended, the request could not be encoded, a stored
	// answer could not be decoded): nothing to retry.
	Local
)

func (f Failure) String() string {
	switch f {
	case Answered:
		return "answered"
	case Broken:
		return "broken"
	case TimedOut:
		return "timed-out"
	case Local:
		return "local"
	}
	return "failure?"
}

// Outcome is how one attempt ended.
type Outcome struct {
	Failure Failure
	Status  protocol.Status // the broker's status, with Answered
}

// Class is what an Outcome means for the send.
type Class int

const (
	// Stored: the broker stored the message and confirmed it (SUCCESS).
	Stored Class = iota
	// Unconfirmed: stored, but the flush to disk or the replication was
	// not confirmed in time (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
	// SLAVE_NOT_AVAILABLE). Final: a resend would duplicate the message.
	Unconfirmed
	// Retryable: not stored, and another attempt (later, or on another
	// broker) may succeed: a retryable status or a broken connection.
	Retryable
	// Failed: not stored (or not known to be), and another attempt would
	// not help or could duplicate: a rejection of the request, a timeout,
	// a local failure.
	Failed
)

func (c Class) String() string {
	switch c {
	case Stored:
		return "stored"
	case Unconfirmed:
		return "unconfirmed"
	case Retryable:
		return "retryable"
	case Failed:
		return "failed"
	}
	return "class?"
}

// Final reports whether the message was stored: the send is over and must
// never be repeated.
func (c Class) Final() bool { return c == Stored || c == Unconfirmed }

// Classify says what o means. The statuses are protocol's own judgement
// (Status.Stored, Unconfirmed, Retryable), so a status added there is
// classified here without a change.
func Classify(o Outcome) Class {
	switch o.Failure {
	case Answered:
	case Broken:
		return Retryable
	default:
		return Failed
	}
	switch s := o.Status; {
	case s == protocol.StatusOK:
		return Stored
	case s.Unconfirmed():
		return Unconfirmed
	case s.Retryable():
		return Retryable
	}
	return Failed
}

// blames reports whether o counts against the broker it went to, for the
// fault latch: it refused with a retryable status, was unreachable, too
// slow to answer, or stored the message without the durability asked
// (SLAVE_NOT_AVAILABLE from a SYNC_MASTER whose slave has not caught up,
// say after its restart: sending it more would get the same answer).
func blames(o Outcome) bool {
	c := Classify(o)
	return o.Failure == TimedOut || c == Retryable || c == Unconfirmed
}
