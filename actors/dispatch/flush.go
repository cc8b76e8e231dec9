package dispatch

// Flush is the state of a queue owner's or the index's checkpoint flush:
// at most one runs at a time, off the actor, and retention of the owner's
// files waits for it (a file must not be closed while it is being synced).
type Flush struct {
	running  bool
	deferred int64 // the log start retention waits to apply; -1: none
}

// Running reports whether a flush is under way.
func (f *Flush) Running() bool { return f.running }

// Start marks a flush under way.
func (f *Flush) Start() {
	if !f.running {
		f.deferred = -1
	}
	f.running = true
}

// Finish ends a flush and returns the retention (the log's new start) that
// waited for it, if any.
func (f *Flush) Finish() (minPhy int64, ok bool) {
	f.running = false
	minPhy, ok = f.deferred, f.deferred >= 0
	f.deferred = -1
	return minPhy, ok
}

// Hold keeps retention to minPhy for later and returns true while a flush
// runs; false: apply it now.
func (f *Flush) Hold(minPhy int64) bool {
	if !f.running {
		return false
	}
	f.deferred = max(f.deferred, minPhy)
	return true
}
