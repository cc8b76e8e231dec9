package rebalance

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// The Member's tests are scripts in testdata/member_*.txt, in the format of
// the coordinator's (see script_test.go). Commands:
//
//	new [group=g] [interval=1s] [consumes=t,u] [keep-revoked]
//	    a member; consumes= limits the topics it consumes (default: all)
//	tick [at=D]
//	sent [at=D]               the heartbeat asked for left
//	answer [at=D] [sent=last|D] [gen=N] [queues=t:0,1;u:2|none] [interval=D] [group=g|none]
//	    the answer to the heartbeat sent at sent= (default: the last sent);
//	    group=none answers without an assignment for the member's group
//	failed [at=D]             the heartbeat in flight failed
//	lost [at=D]               the connection was lost
//	notify [at=D]             NOTIFY_CONSUMER_IDS_CHANGED
//	released t:0 [at=D]       the owner finished stopping the queue
//	close [at=D]
//
// Each command prints the Ready: start (with the generation), stop, drop,
// ignored, heartbeat (Owned and Generation) and deadline. The script's owner
// keeps its own view of the queues it consumes and checks every Ready
// against it.
func TestMemberScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/member_*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no member scripts in testdata (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			e := &memberEnv{t: t, now: time.UnixMilli(0)}
			runScript(t, f, e.run)
		})
	}
}

// memberEnv is the script's owner of a Member.
type memberEnv struct {
	t        *testing.T
	m        *Member
	group    string
	keep     bool
	now      time.Time
	lastSent time.Time
	closed   bool
	// The owner's view: queues consuming and queues stopping (Stop or
	// Drop, until released).
	consuming, stopping map[protocol.QueueRef]bool
}

func (e *memberEnv) run(where, line string) []string {
	cmd, args, pos := parseLine(line, func(s string) bool { return s == "keep-revoked" })
	if at, ok := args["at"]; ok {
		e.now = time.UnixMilli(0).Add(parseDuration(e.t, where, at))
	}
	if cmd != "new" && e.m == nil {
		e.t.Fatalf("%s: %s before new", where, cmd)
	}
	switch cmd {
	case "new":
		return e.newMember(where, args)
	case "tick":
		return e.ready(where, e.m.Tick(e.now))
	case "sent":
		e.lastSent = e.now
		return e.ready(where, e.m.HeartbeatSent(e.now))
	case "answer":
		return e.answer(where, args)
	case "failed":
		return e.ready(where, e.m.HeartbeatFailed(e.now))
	case "lost":
		return e.ready(where, e.m.ConnectionLost(e.now))
	case "notify":
		return e.ready(where, e.m.Notified(e.now))
	case "released":
		q := parseRefs(e.t, where, one(e.t, where, pos))
		if len(q) != 1 {
			e.t.Fatalf("%s: released takes one queue", where)
		}
		if !e.stopping[q[0]] {
			e.t.Fatalf("%s: released %s, which the owner was not stopping", where, ref(q[0]))
		}
		delete(e.stopping, q[0])
		return e.ready(where, e.m.Released(e.now, q[0]))
	case "close":
		e.closed = true
		return e.ready(where, e.m.Close(e.now))
	}
	e.t.Fatalf("%s: unknown command %q", where, cmd)
	return nil
}

func (e *memberEnv) newMember(where string, args map[string]string) []string {
	e.group = orDefault(args["group"], "g")
	cfg := MemberConfig{Group: e.group}
	if v, ok := args["interval"]; ok {
		cfg.Interval = parseDuration(e.t, where, v)
	}
	if v, ok := args["consumes"]; ok {
		topics := strings.Split(v, ",")
		cfg.Consumes = func(t string) bool { return slices.Contains(topics, t) }
	}
	_, e.keep = args["keep-revoked"]
	cfg.KeepRevoked = e.keep
	e.m = NewMember(cfg)
	e.consuming, e.stopping = map[protocol.QueueRef]bool{}, map[protocol.QueueRef]bool{}
	return nil
}

func (e *memberEnv) answer(where string, args map[string]string) []string {
	sent := e.lastSent
	if v := orDefault(args["sent"], "last"); v != "last" {
		sent = time.UnixMilli(0).Add(parseDuration(e.t, where, v))
	}
	var resp protocol.HeartbeatResponse
	if v, ok := args["interval"]; ok {
		resp.HeartbeatIntervalMillis = parseDuration(e.t, where, v).Milliseconds()
	}
	if g := orDefault(args["group"], e.group); g != "none" {
		a := protocol.GroupAssignment{Group: g}
		if v, ok := args["gen"]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				e.t.Fatalf("%s: bad gen %q", where, v)
			}
			a.Generation = n
		}
		if v := orDefault(args["queues"], "none"); v != "none" {
			a.Queues = parseRefs(e.t, where, v)
		}
		resp.Assignments = []protocol.GroupAssignment{a}
	}
	return e.ready(where, e.m.HeartbeatAnswered(e.now, sent, resp))
}

// ready prints a Ready and checks it against the owner's view.
func (e *memberEnv) ready(where string, r MemberReady) []string {
	e.check(where, r)
	var out []string
	if len(r.Drop) > 0 {
		out = append(out, "drop "+refs(r.Drop))
	}
	if len(r.Stop) > 0 {
		out = append(out, "stop "+refs(r.Stop))
	}
	if len(r.Start) > 0 {
		out = append(out, fmt.Sprintf("start %s gen=%d", refs(r.Start), r.Generation))
	}
	if len(r.Ignored) > 0 {
		out = append(out, "ignored "+refs(r.Ignored))
	}
	if r.Heartbeat {
		out = append(out, fmt.Sprintf("heartbeat owned=%s gen=%d", refs(r.Owned), r.Generation))
	}
	if !r.Deadline.IsZero() {
		out = append(out, "deadline "+r.Deadline.Sub(time.UnixMilli(0)).String())
	}
	return out
}

// check holds what every Ready must keep: Stop and Drop name only queues
// being consumed, Start only queues not held, the heartbeat lists exactly
// the queues held, a consuming member has a deadline (its lease is
// enforced), and after Close nothing starts and no heartbeat goes out.
func (e *memberEnv) check(where string, r MemberReady) {
	fail := func(format string, a ...any) { e.t.Fatalf("%s: "+format, append([]any{where}, a...)...) }
	for _, q := range slices.Concat(r.Drop, r.Stop) {
		if !e.consuming[q] {
			fail("stop or drop of %s, which the owner does not consume", ref(q))
		}
		delete(e.consuming, q)
		e.stopping[q] = true
	}
	for _, q := range r.Start {
		if e.stopping[q] || (e.consuming[q] && !e.keep) {
			fail("start of %s, which the owner holds", ref(q))
		}
		e.consuming[q] = true
	}
	if e.closed && (r.Heartbeat || len(r.Start) > 0) {
		fail("a closed member starts %v or heartbeats (%v)", r.Start, r.Heartbeat)
	}
	if r.Heartbeat && !e.keep {
		held := append(sortedKeys(e.consuming), sortedKeys(e.stopping)...)
		sortRefs(held)
		if !slices.Equal(held, r.Owned) {
			fail("heartbeat owns %s, the owner holds %s", refs(r.Owned), refs(held))
		}
	}
	if len(e.consuming) > 0 && !e.closed && r.Deadline.IsZero() {
		fail("consuming %s with no deadline: nothing would end the lease", refs(sortedKeys(e.consuming)))
	}
}

func sortedKeys(m map[protocol.QueueRef]bool) []protocol.QueueRef {
	out := make([]protocol.QueueRef, 0, len(m))
	for q := range m {
		out = append(out, q)
	}
	sortRefs(out)
	return out
}
