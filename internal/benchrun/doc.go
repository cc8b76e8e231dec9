// Package benchrun is the implementation of `wharf bench`: it runs the
// benchmark scenarios (async, batch and sync publishing, consuming a
// backlog, publish->consume latency, SYNC_MASTER against ASYNC_MASTER and a
// raw-disk probe) against a broker and reports one Result per scenario and
// body size.
//
// Contract:
//
//   - Run takes Options (DefaultOptions gives the command's defaults,
//     QuickOptions the --quick ones), checks them and runs each scenario at
//     each size in a fixed order. Errors about Options name the `wharf
//     bench` flags, because that is where the values came from.
//   - By default each scenario gets a fresh broker: a child process
//     `<BrokerBin> bench serve --storePathRootDir DIR --listenPort P
//     --flushDiskType F --pprof-addr A --log-level L [BrokerArgs...]` on a
//     free loopback port with a temporary store under StoreDir, started with
//     ChildEnv=1 in its environment. The binary must implement `bench
//     serve`: `wharf broker` plus a loopback pprof/expvar listener, for
//     the broker's Go heap and profiles; its CPU time comes from /proc.
//     With Options.Broker an existing broker is used instead and no broker
//     figures are reported.
//   - The cluster scenarios (route-propagation, groups-2-vs-1; not in
//     "all") start their own cluster: a child `<BrokerBin> namesrv` on a
//     free loopback port and masters (`bench serve --namesrvAddr ...`, one
//     brokerName each) registered with it; the clients use WithNameServer
//     (groups-2-vs-1's direct line uses the broker's address). They are
//     skipped with Options.Broker. groups-2-vs-1 reports medians over
//     Options.ABRounds rounds, running its configurations in alternating
//     order, and the ratio of throughputs as a median of per-round ratios.
//   - Results go to stdout as they complete, one JSON object a line with
//     Options.JSON (the field names of Result are a format other programs
//     parse: bench/ and bench/scripts/ab.sh), or as one table at the end.
//     Progress and failures of single scenarios go to stderr; a failed
//     scenario does not stop the others, and Run reports them all in its
//     error. When ctx ends, Run stops after the scenario under way and
//     returns ctx's error.
//   - With Options.Report, Run also writes an HTML page with inline SVG
//     charts (internal/benchreport) of every result that was not skipped:
//     its latency percentile curve and its throughput in each second of
//     the measured window, the lines of one comparison (sync-master-64's
//     roles, groups-2-vs-1's configurations of a load) in one chart. The
//     JSON lines carry the same data (latency_curve, throughput_per_s), so
//     bench/ draws its comparisons from them.
//   - The load's clients run in the calling process; Run raises its GOGC
//     (unless the environment sets one) so their collector stays out of the
//     measured latencies.
package benchrun
