package main

import (
	"log/slog"
	"os"
	"runtime"
)

// defaultProcs is GOMAXPROCS as the runtime chose it at start (the CPUs,
// or the container's CPU limit), before tuneProcs raised it.
var defaultProcs = runtime.GOMAXPROCS(0)

// brokerExtraProcs is how many Ps the broker gets beyond the CPUs. Two of
// its threads wait in the kernel while holding a P under load: the client
// listener's event loop (gnet blocks in epoll_wait on its own goroutine,
// unlike Go's netpoller, which gives its P back first) and the background
// I/O lane (msync and fsync of the CommitLog and the ConsumeQueues). When
// both did at once on a 2-core machine, a mailbox run the loop had readied
// onto its own P just before its epoll_wait had no P to run on until sysmon
// took one back, 10-20 ms later. One spare P is enough for the woken run
// to be stolen at once; a second only added spinning threads (sync-1's
// broker CPU per message +10 %, docs/BENCHMARKS.md).
const brokerExtraProcs = 1

// tuneProcs raises GOMAXPROCS by brokerExtraProcs. The spare P runs Go
// code only while those threads are in the kernel, so the broker does not
// use more CPU than it has. GOMAXPROCS in the environment takes precedence.
func tuneProcs(log *slog.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	n := defaultProcs + brokerExtraProcs
	runtime.GOMAXPROCS(n)
	log.Debug("scheduler", "gomaxprocs", n, "cpus", defaultProcs)
}
