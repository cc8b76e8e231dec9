//go:build race

package protocol

// raceEnabled: the race detector's instrumentation changes what escapes,
// so allocation counts measured under it are not the build's.
const raceEnabled = true
