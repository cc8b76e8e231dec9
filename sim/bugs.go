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
	plant     func(*Planted)
}

// Planted is what a bug switches on in every node of a run: the broker's
// faults (actors.Env.Faults) and the store's (storage.Config.Faults); and in
// every group member, whose member logic is the client's
// (rebalance.MemberConfig.KeepRevoked).
type Planted struct {
	Actors      actors.Faults
	Storage     storage.Faults
	KeepRevoked bool
	// StaleRoutes: the simulated producer drives client/sendpath without
	// the client's route refresh (no interval, no refresh on a broken
	// connection): it keeps the first route it read.
	StaleRoutes bool
}

// Bugs lists every bug switch.
var Bugs = []Bug{
	{Name: "ack-before-flush", Breaks: "an acknowledgement claims durability that did not happen",
		Scenarios: []string{"sync-flush"}, plant: func(p *Planted) { p.Actors.AckBeforeFlush = true }},
	{Name: "ack-before-replica", Breaks: "a SYNC_MASTER acknowledgement means a slave has the bytes",
		Scenarios: []string{"sync-master"}, plant: func(p *Planted) { p.Actors.AckBeforeReplica = true }},
	{Name: "double-assign", Breaks: "no queue has two owners at once in clustering mode",
		Scenarios: []string{"rebalance"}, plant: func(p *Planted) { p.Actors.DoubleAssign = true }},
	{Name: "keep-revoked", Breaks: "a member stops consuming a revoked queue before it reports it released",
		Scenarios: []string{"rebalance"}, plant: func(p *Planted) { p.KeepRevoked = true }},
	{Name: "skip-crc-check", Breaks: "recovery keeps a torn record; every record must be intact",
		// A power cut must leave a page missing inside a large record's body
		// with its tail kept: that needs unflushed bytes, so ASYNC_FLUSH, and
		// many power cuts.
		Scenarios: []string{"async-power-cuts"}, plant: func(p *Planted) { p.Storage.SkipCRCCheck = true }},
	{Name: "no-flush-timeout", Breaks: "SYNC_FLUSH waiters get FLUSH_DISK_TIMEOUT at syncFlushTimeout",
		Scenarios: []string{"sync-disk-faults"}, plant: func(p *Planted) { p.Actors.NoFlushTimeout = true }},
	{Name: "async-never-flush", Breaks: "the ASYNC_FLUSH unflushed window is bounded",
		Scenarios: []string{"async-flush"}, plant: func(p *Planted) { p.Actors.AsyncNeverFlush = true }},
	{Name: "commit-offset-before-persist", Breaks: "committed consumer offsets never move backwards",
		Scenarios: []string{"sync-flush", "async-flush"}, plant: func(p *Planted) { p.Actors.CommitOffsetBeforePersist = true }},
	{Name: "skip-queue-offset", Breaks: "queue offsets are contiguous with no gap or duplicate",
		Scenarios: []string{"sync-flush", "async-flush"}, plant: func(p *Planted) { p.Storage.SkipQueueOffset = true }},
	{Name: "elect-outside-sync-state-set", Breaks: "the controllers elect a new master only from the SyncStateSet",
		// A slave cut off from its master falls out of the set while it
		// still heartbeats the controllers: the live replica outside it.
		Scenarios: []string{"ctl-master-crash"}, plant: func(p *Planted) { p.Actors.ElectOutsideSyncStateSet = true }},
	{Name: "elect-lacking-replica", Breaks: "the controllers elect a SyncStateSet member that lost acknowledged copies only as the best of the whole set",
		Scenarios: []string{"ctl-lost-tail"}, plant: func(p *Planted) { p.Actors.ElectLackingReplica = true }},
	{Name: "no-lease", Breaks: "a master stops storing writes before a master of a newer epoch takes its first (the lease)",
		Scenarios: []string{"ctl-master-partition", "ctl-master-pause"}, plant: func(p *Planted) { p.Actors.NoLease = true }},
	{Name: "ack-old-sync-state-set", Breaks: "a SEND_OK comes only once every member of the SyncStateSet the controllers applied holds the message",
		Scenarios: []string{"ctl-master-crash"}, plant: func(p *Planted) { p.Actors.AckOldSyncStateSet = true }},
	{Name: "skip-truncation", Breaks: "a replica that rejoins cuts its log back to the point it shares with the new master, then holds the master's log",
		Scenarios: []string{"ctl-rejoin"}, plant: func(p *Planted) { p.Actors.SkipTruncation = true }},
	{Name: "stale-routes", Breaks: "a producer stops sending to a broker out of every name server's routes within lease + refresh",
		Scenarios: []string{"ns-master-crash"}, plant: func(p *Planted) { p.StaleRoutes = true }},
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

// Faults returns what the bug plants.
func (b Bug) Faults() Planted {
	var p Planted
	b.plant(&p)
	return p
}
