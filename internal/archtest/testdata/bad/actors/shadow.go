package actors

import "time"

type clockSeam interface{ Now() time.Time }

// stamp's time is the Clock seam, not the package: not a finding.
func stamp(time clockSeam) { _ = time.Now() }

func wait() { <-time.After(1) } // want seams: time.After: time is an input

func elapsed(t0 time.Time) time.Duration { return time.Since(t0) } // want seams: time.Since: time is an input
