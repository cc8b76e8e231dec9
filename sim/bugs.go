package sim

import (
	"fmt"
	"sort"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/storage"
)

// Bug is a planted bug: a test-only switch in the production code that
// breaks one class of invariant, to prove the simulator catches it.
type Bug struct {
	Name      string
	Breaks    string // the invariant class it breaks
	Scenarios []string
	set       func(on bool)
}

// Bugs lists every bug switch.
var Bugs = []Bug{
	{Name: "ack-before-flush", Breaks: "an acknowledgement claims durability that did not happen",
		Scenarios: []string{"sync-flush"}, set: func(on bool) { actors.Bugs.AckBeforeFlush = on }},
	{Name: "ack-before-replica", Breaks: "a SYNC_MASTER acknowledgement means a slave has the bytes",
		Scenarios: []string{"sync-master"}, set: func(on bool) { actors.Bugs.AckBeforeReplica = on }},
	{Name: "double-assign", Breaks: "no queue has two owners at once in clustering mode",
		Scenarios: []string{"rebalance"}, set: func(on bool) { actors.Bugs.DoubleAssign = on }},
	{Name: "skip-crc-check", Breaks: "recovery keeps a torn record; every record must be intact",
		Scenarios: []string{"async-flush", "sync-flush"}, set: func(on bool) { storage.Bugs.SkipCRCCheck = on }},
	{Name: "no-flush-timeout", Breaks: "SYNC_FLUSH waiters get FLUSH_DISK_TIMEOUT at syncFlushTimeout",
		Scenarios: []string{"sync-disk-faults"}, set: func(on bool) { actors.Bugs.NoFlushTimeout = on }},
	{Name: "async-never-flush", Breaks: "the ASYNC_FLUSH unflushed window is bounded",
		Scenarios: []string{"async-flush"}, set: func(on bool) { actors.Bugs.AsyncNeverFlush = on }},
	{Name: "commit-offset-before-persist", Breaks: "committed consumer offsets never move backwards",
		Scenarios: []string{"sync-flush", "async-flush"}, set: func(on bool) { actors.Bugs.CommitOffsetBeforePersist = on }},
	{Name: "skip-queue-offset", Breaks: "queue offsets are contiguous with no gap or duplicate",
		Scenarios: []string{"sync-flush", "async-flush"}, set: func(on bool) { storage.Bugs.SkipQueueOffset = on }},
}

// BugByName finds a bug switch.
func BugByName(name string) (Bug, error) {
	for _, b := range Bugs {
		if b.Name == name {
			return b, nil
		}
	}
	names := make([]string, len(Bugs))
	for i, b := range Bugs {
		names[i] = b.Name
	}
	sort.Strings(names)
	return Bug{}, fmt.Errorf("unknown bug %q (known: %v)", name, names)
}

// Plant turns the bug on; the returned func turns it off.
func (b Bug) Plant() func() {
	b.set(true)
	return func() { b.set(false) }
}
