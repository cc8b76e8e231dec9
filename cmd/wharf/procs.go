package main

import (
	"log/slog"
	"os"
	"runtime"
)

// defaultProcs is GOMAXPROCS as the runtime chose it at start (the CPUs,
// or the container's CPU limit), before tuneProcs raised it.
var defaultProcs = runtime.GOMAXPROCS(0)

// brokerExtraProcs is how many Ps the broker gets beyond the CPUs: one for
// each thread that, under load, waits in the kernel while holding its P:
// the client listener's event loop (gnet blocks in epoll_wait on its own
// goroutine, unlike Go's netpoller, which gives its P back first) and the
// background I/O lane (msync and fsync of the CommitLog and the
// ConsumeQueues). An idle listener's P is taken back within 10-20 ms and
// stays free while it idles, so the others are not counted.
const brokerExtraProcs = 2

// tuneProcs raises GOMAXPROCS by brokerExtraProcs. The runtime takes a P
// back from a thread in a syscall only when sysmon looks, and sysmon, once
// nothing has needed it for a while, looks every 10 ms. With GOMAXPROCS at
// the CPUs both Ps of a 2-core machine sat in those two syscalls during
// every interval flush while the writer's mailbox run, readied onto the
// event loop's P just before its epoll_wait, waited 10-20 ms for sysmon:
// async-256's p999 (docs/BENCHMARKS.md, "the P held in epoll_wait").
// The extra Ps run Go code only while those threads are in the kernel, so
// the broker does not use more CPU than it has. GOMAXPROCS in the
// environment takes precedence.
func tuneProcs(log *slog.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	n := defaultProcs + brokerExtraProcs
	runtime.GOMAXPROCS(n)
	log.Debug("scheduler", "gomaxprocs", n, "cpus", defaultProcs)
}
