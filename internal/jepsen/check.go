package jepsen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The anomalies' names, Jepsen's where Jepsen has one.
const (
	LostWrite           = "lost-write"
	Duplicate           = "duplicate"
	InconsistentOffsets = "inconsistent-offsets"
	Nonmonotonic        = "nonmonotonic"
	G1a                 = "G1a"
	Unexpected          = "unexpected"
)

// Summary counts a history's sends by outcome and its reads.
type Summary struct {
	Sent          int // distinct keys invoked or completed
	Acked         int
	Failed        int
	Indeterminate int // including sends never completed
	Read          int // distinct keys seen
	Reads         int // read records
}

// Anomaly is one violation found.
type Anomaly struct {
	Name   string // one of the constants above
	Key    string // the key concerned, if one
	Pos    Pos    // the position concerned, if one
	Detail string
}

func (a Anomaly) String() string { return a.Name + ": " + a.Detail }

// Result is what Check found.
type Result struct {
	Summary
	// UnackedRead counts the keys seen whose sends were indeterminate
	// (Jepsen would look for G1a there; a timed-out send may be stored).
	UnackedRead int
	Anomalies   []Anomaly // sorted by name, then key, then position
}

// OK reports whether no anomaly was found.
func (r Result) OK() bool { return len(r.Anomalies) == 0 }

// Count returns how many anomalies of name were found.
func (r Result) Count(name string) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Name == name {
			n++
		}
	}
	return n
}

// String is one line: the summary and the count of each anomaly found.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d: acked %d, failed %d, indeterminate %d; read %d keys (%d reads, %d of them unacked)",
		r.Sent, r.Acked, r.Failed, r.Indeterminate, r.Read, r.Reads, r.UnackedRead)
	counts := map[string]int{}
	for _, a := range r.Anomalies {
		counts[a.Name]++
	}
	if len(counts) == 0 {
		b.WriteString("; no anomalies")
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "; %s %d", name, counts[name])
	}
	return b.String()
}

// send is what the history says of one key's sends.
type send struct {
	invoked, completed int
	acked, indet       bool
	ackedAt            Pos // the first acknowledgement's position
}

// outcome is the strongest the history says of the key: acked, then
// indeterminate (a send with no completion included), then failed.
func (s *send) outcome() Outcome {
	switch {
	case s.acked:
		return Acked
	case s.indet || s.invoked > s.completed:
		return Indeterminate
	default:
		return Failed
	}
}

// Check examines a history (in its recorded order) and reports its summary
// and anomalies. Keys are meant to be unique per send.
func Check(ops []Op) Result {
	sends := map[string]*send{}
	seenAt := map[string]map[Pos]bool{} // key -> positions it was read at
	var r Result
	for _, op := range ops {
		switch op.Kind {
		case Invoke, Complete:
			s := sends[op.Key]
			if s == nil {
				s = &send{}
				sends[op.Key] = s
			}
			if op.Kind == Invoke {
				s.invoked++
				continue
			}
			s.completed++
			switch op.Outcome {
			case Acked:
				if !s.acked {
					s.acked, s.ackedAt = true, op.Pos
				}
			case Indeterminate:
				s.indet = true
			}
		case Read:
			r.Reads++
			if seenAt[op.Key] == nil {
				seenAt[op.Key] = map[Pos]bool{}
			}
			seenAt[op.Key][op.Pos] = true
		}
	}
	r.Summary.summarize(sends, seenAt)
	r.Anomalies = append(r.Anomalies, checkKeys(sends, seenAt, &r.UnackedRead)...)
	r.Anomalies = append(r.Anomalies, checkPositions(sends, seenAt)...)
	r.Anomalies = append(r.Anomalies, checkMonotonic(ops)...)
	slices.SortFunc(r.Anomalies, func(a, b Anomaly) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Key, b.Key), comparePos(a.Pos, b.Pos))
	})
	return r
}

func (s *Summary) summarize(sends map[string]*send, seenAt map[string]map[Pos]bool) {
	s.Sent, s.Read = len(sends), len(seenAt)
	for _, x := range sends {
		switch x.outcome() {
		case Acked:
			s.Acked++
		case Failed:
			s.Failed++
		default:
			s.Indeterminate++
		}
	}
}

// checkKeys finds, key by key, lost writes, G1a, unexpected keys and
// duplicates, and counts the indeterminate sends seen.
func checkKeys(sends map[string]*send, seenAt map[string]map[Pos]bool, unackedRead *int) []Anomaly {
	var out []Anomaly
	for _, key := range slices.Sorted(maps.Keys(sends)) {
		s, seen := sends[key], len(seenAt[key]) > 0
		switch s.outcome() {
		case Acked:
			if !seen {
				out = append(out, Anomaly{Name: LostWrite, Key: key, Pos: s.ackedAt,
					Detail: fmt.Sprintf("key %s acknowledged at %v, never read", key, s.ackedAt)})
			}
		case Failed:
			if seen {
				out = append(out, Anomaly{Name: G1a, Key: key,
					Detail: fmt.Sprintf("key %s refused by the broker, read at %v", key, positions(seenAt[key]))})
			}
		case Indeterminate:
			if seen {
				*unackedRead++
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(seenAt)) {
		at := seenAt[key]
		if sends[key] == nil {
			out = append(out, Anomaly{Name: Unexpected, Key: key,
				Detail: fmt.Sprintf("key %s read at %v, never sent", key, positions(at))})
		}
		if len(at) > 1 {
			out = append(out, Anomaly{Name: Duplicate, Key: key,
				Detail: fmt.Sprintf("key %s read at %d positions: %v", key, len(at), positions(at))})
		}
	}
	return out
}

// checkPositions finds positions holding two keys, counting the position
// an acknowledgement named as holding its key, and acknowledged keys read
// only elsewhere than where they were acknowledged.
func checkPositions(sends map[string]*send, seenAt map[string]map[Pos]bool) []Anomaly {
	holds := map[Pos]map[string]string{} // position -> key -> how we know
	note := func(p Pos, key, how string) {
		if holds[p] == nil {
			holds[p] = map[string]string{}
		}
		if holds[p][key] == "" {
			holds[p][key] = how
		}
	}
	for key, at := range seenAt {
		for p := range at {
			note(p, key, "read")
		}
	}
	var out []Anomaly
	for key, s := range sends {
		if !s.acked {
			continue
		}
		note(s.ackedAt, key, "acknowledged")
		if at := seenAt[key]; len(at) > 0 && !at[s.ackedAt] && len(seenKeysAt(seenAt, s.ackedAt)) == 0 {
			out = append(out, Anomaly{Name: InconsistentOffsets, Key: key, Pos: s.ackedAt,
				Detail: fmt.Sprintf("key %s acknowledged at %v, read at %v", key, s.ackedAt, positions(at))})
		}
	}
	for p, keys := range holds {
		if len(keys) < 2 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			parts = append(parts, k+" ("+keys[k]+")")
		}
		out = append(out, Anomaly{Name: InconsistentOffsets, Pos: p,
			Detail: fmt.Sprintf("%v holds %d keys: %s", p, len(keys), strings.Join(parts, ", "))})
	}
	return out
}

// seenKeysAt lists the keys read at p.
func seenKeysAt(seenAt map[string]map[Pos]bool, p Pos) []string {
	var keys []string
	for k, at := range seenAt {
		if at[p] {
			keys = append(keys, k)
		}
	}
	return keys
}

// checkMonotonic finds, per reader and queue, a read whose offset is not
// above the reader's previous one in that queue.
func checkMonotonic(ops []Op) []Anomaly {
	type stream struct {
		reader string
		q      Queue
	}
	last := map[stream]Op{}
	var out []Anomaly
	for _, op := range ops {
		if op.Kind != Read {
			continue
		}
		s := stream{op.Process, op.Pos.Queue}
		if prev, ok := last[s]; ok && op.Pos.Offset <= prev.Pos.Offset {
			out = append(out, Anomaly{Name: Nonmonotonic, Key: op.Key, Pos: op.Pos,
				Detail: fmt.Sprintf("reader %s read %s at %v after %s at offset %d (op %d after op %d)",
					op.Process, op.Key, op.Pos, prev.Key, prev.Pos.Offset, op.Seq, prev.Seq)})
		}
		last[s] = op
	}
	return out
}

func positions(at map[Pos]bool) []Pos {
	return slices.SortedFunc(maps.Keys(at), comparePos)
}

func comparePos(a, b Pos) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic),
		cmp.Compare(a.ID, b.ID), cmp.Compare(a.Offset, b.Offset))
}
