// Package dashboard is Wharf's web dashboard: an http.Handler serving a
// page embedded in the binary (web/, plain HTML, JS and CSS: no build step,
// nothing fetched from elsewhere) and the JSON API that page calls.
//
// Contract:
//   - Every number comes from the cluster's own answers, asked through the Go
//     client's Admin starting from a name server: ClusterInfo, TopicRoute,
//     GetMin/MaxOffset, ListGroups, DescribeGroup, RuntimeInfo, QueryByKey,
//     ViewMessage, and the controller's metadata when a controller address
//     is configured. The dashboard keeps no copy of the cluster's state but
//     the sampled history below.
//   - Run samples every broker each SampleEvery (RuntimeInfo's counters and,
//     when MetricsPortOffset is set, the send-latency histogram of the
//     broker's /metrics) into a ring of the last History per broker, so the
//     throughput and latency charts have minutes of past. Run's goroutine is
//     the one writer of that state; handlers read copies under a mutex.
//   - A broker or name server that does not answer is a state in the JSON
//     ("error" fields, health "down"), never a failed page: the API answers
//     200 with what it could gather, and 502 only when nothing could be
//     asked at all (the name server is down).
//   - Mutating calls (topic create and delete) need the X-Wharf-Dashboard
//     header, which a cross-origin page cannot send without a preflight this
//     handler never grants.
package dashboard
