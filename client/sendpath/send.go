package sendpath

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Send is the retry plan of one send (one message or one batch).
type Send struct {
	t        *Table
	topic    string
	fixed    QueueRef  // QueueID >= 0: the caller chose the queue
	deadline time.Time // zero: none
	failures int       // attempts that failed
	avoid    string    // broker of the last failed attempt
	routed   bool      // this attempt's route was just fetched
}

// Begin starts a send to topic. to is the caller's queue, or AnyQueue for
// the Table's choice; deadline (zero: none) is when retries stop, the
// caller's context deadline. Begin reads and writes nothing of t's: it may
// run concurrently with calls on t.
func (t *Table) Begin(topic string, to QueueRef, deadline time.Time) *Send {
	s := t.Plan(topic, to, deadline)
	return &s
}

// Plan is Begin's Send as a value, for a caller that keeps it inside
// state of its own (one allocation for both).
func (t *Table) Plan(topic string, to QueueRef, deadline time.Time) Send {
	return Send{t: t, topic: topic, fixed: to, deadline: deadline}
}

// Topic is the send's topic.
func (s *Send) Topic() string { return s.topic }

// Failures is the number of attempts that failed so far.
func (s *Send) Failures() int { return s.failures }

// Step is what the caller does next.
type Step struct {
	// Fetch: the topic's route is unknown or stale; fetch it and hand it
	// to Routed (or report the fetch's failure to Outcome, as a failed
	// attempt), then call Next again.
	Fetch bool
	// To is where the attempt goes, without Fetch.
	To QueueRef
	// Attempt numbers the attempt, from 1.
	Attempt int
}

func (st Step) String() string {
	if st.Fetch {
		return fmt.Sprintf("attempt %d: fetch the route", st.Attempt)
	}
	return fmt.Sprintf("attempt %d: send to %v", st.Attempt, st.To)
}

// Next says where the next attempt goes at now. A caller-chosen queue needs
// no route. A retry prefers another broker than the one that failed last.
func (s *Send) Next(now time.Time) Step {
	st := Step{Attempt: s.failures + 1}
	switch {
	case s.fixed.QueueID >= 0:
		st.To = s.fixed
	case !s.routed && !s.t.Fresh(s.topic, now):
		st.Fetch = true
	default:
		st.To = s.t.Pick(s.topic, now, s.avoid)
	}
	return st
}

// Routed installs the route fetched for this attempt (see Table.Update).
// The attempt then uses the Table's route even if it is already past its
// TTL (RouteTTL 0 means "fetch before every attempt"), so Next does not ask
// for it again until the next attempt.
func (s *Send) Routed(r Route) {
	s.t.Update(r)
	s.routed = true
}

// Verdict is what a Decision tells the caller to do.
type Verdict int

const (
	// Done: the broker stored the message (Class says whether
	// confirmed). Never resend.
	Done Verdict = iota
	// Retry: call Next at At and send again.
	Retry
	// Fail: give up; the send fails with this attempt's error.
	Fail
)

func (v Verdict) String() string {
	switch v {
	case Done:
		return "done"
	case Retry:
		return "retry"
	case Fail:
		return "fail"
	}
	return "verdict?"
}

// Decision is the core's answer to an attempt's Outcome.
type Decision struct {
	Verdict Verdict
	Class   Class     // the attempt's class
	At      time.Time // with Retry: when to call Next
}

func (d Decision) String() string {
	if d.Verdict == Retry {
		return fmt.Sprintf("retry (%v) at %s", d.Class, d.At.Format("15:04:05.000"))
	}
	return fmt.Sprintf("%v (%v)", d.Verdict, d.Class)
}

// Outcome feeds the outcome o, at now, of the attempt that went to to (for
// a failed route fetch: the broker asked), and decides. TOPIC_NOT_EXIST
// forgets the topic's route; a failure that blames the broker latches it
// (Config.AvoidFor). A stored message is Done; a Retryable failure is
// retried while attempts are left and the pause ends before the deadline.
//
// An outcome whose class is Stored touches s only, not the Table, and does
// not read now: a caller with a lock around the Table need not take it (nor
// read the clock) for the answers of a healthy broker. An Unconfirmed one
// is Done too, but latches the broker: it stored the message and could not
// make it as durable as asked (its disk or its slaves are behind), so the
// next sends go to another group for a while.
func (s *Send) Outcome(now time.Time, to QueueRef, o Outcome) Decision {
	s.routed = false
	c := Classify(o)
	if o.Failure == Answered && o.Status == protocol.StatusTopicNotExist {
		s.t.Forget(s.topic)
	}
	if blames(o) {
		s.t.Blame(to.Broker, now)
	}
	switch c {
	case Stored, Unconfirmed:
		return Decision{Verdict: Done, Class: c}
	case Failed:
		return Decision{Verdict: Fail, Class: c}
	}
	s.failures++
	s.avoid = to.Broker
	if s.failures > s.t.cfg.Retries {
		return Decision{Verdict: Fail, Class: c}
	}
	at := now.Add(s.pause())
	if !s.deadline.IsZero() && !at.Before(s.deadline) {
		return Decision{Verdict: Fail, Class: c}
	}
	return Decision{Verdict: Retry, Class: c, At: at}
}

// unbounded stands for "no MaxBackoff": far beyond any deadline, far from
// overflowing time.Time.Add.
const unbounded = time.Duration(1 << 62)

// pause is the wait before the retry after s.failures failures: Backoff,
// doubling per further failure, bounded by MaxBackoff.
func (s *Send) pause() time.Duration {
	bound := s.t.cfg.MaxBackoff
	if bound <= 0 {
		bound = unbounded
	}
	d := min(s.t.cfg.Backoff, bound)
	for i := 1; i < s.failures && d < bound; i++ {
		if d > bound/2 { // doubling would pass the bound (or overflow)
			return bound
		}
		d *= 2
	}
	return d
}
