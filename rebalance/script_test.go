package rebalance

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// The coordinator's tests are scripts in testdata/*.txt, in the style of
// etcd raft's interaction tests: a command, "----", and the outputs it must
// produce, then a blank line. `go test ./rebalance -rewrite` rewrites the
// expected outputs from what the code does, to be reviewed as a diff.
//
// Commands (times are durations since the Unix epoch; a command without
// at= happens at the previous command's time):
//
//	new [group=g] [interval=1s] [boot=0s] [at=0s] [queues=t:4,u:2] [double-assign] [moves]
//	    a coordinator; the group's retry topic has one queue unless queues=
//	    says otherwise; moves prints every change of a queue's owner
//	hb ID [at=D] [owns=last|none|t:0,1;u:2] [gen=last|N] [subs=t,u|none]
//	    [model=BROADCASTING] [strategy=CONSISTENT_HASH] [orderly]
//	    a heartbeat; by default the member reports holding exactly what it
//	    was last assigned and echoes that assignment's generation
//	leave ID [at=D]
//	tick [at=D]
//	queues t:8,u:0          change topics' queue counts
//	describe                the group's description
//	summary                 the summary of the last input
var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs in testdata")

func TestRebalanceScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata (%v)", err)
	}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "member_") {
			continue // TestMemberScripts
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			e := &scriptEnv{t: t, now: time.UnixMilli(0)}
			runScript(t, f, e.run)
		})
	}
}

// runScript runs one script, comparing (or with -rewrite, replacing) each
// command's output.
func runScript(t *testing.T, path string, run func(where, line string) []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q without ----", path, i+1, line)
		}
		cmdLine := i + 1
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got := run(fmt.Sprintf("%s:%d", path, cmdLine), line)
		if !*rewrite && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, cmdLine, line, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		out.WriteString(line + "\n----\n")
		for _, l := range got {
			out.WriteString(l + "\n")
		}
		if i < len(lines) {
			out.WriteString("\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scriptMember struct {
	gen      int64
	assigned []protocol.QueueRef
}

type scriptEnv struct {
	t       *testing.T
	c       *Coordinator
	group   string
	queues  map[string]int32
	members map[string]*scriptMember
	now     time.Time
	moves   bool
	last    *Summary
}

// parseLine splits a command into its name, key=value arguments (flags
// as keys with empty values) and positional arguments.
func parseLine(line string, isFlag func(string) bool) (string, map[string]string, []string) {
	fields := strings.Fields(line)
	args := map[string]string{}
	var pos []string
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		} else if isFlag(f) {
			args[f] = ""
		} else {
			pos = append(pos, f)
		}
	}
	return fields[0], args, pos
}

func (e *scriptEnv) run(where, line string) []string {
	cmd, args, pos := parseLine(line, isFlag)
	if at, ok := args["at"]; ok {
		e.now = time.UnixMilli(0).Add(e.duration(where, at))
	}
	if cmd != "new" && e.c == nil {
		e.t.Fatalf("%s: %s before new", where, cmd)
	}
	switch cmd {
	case "new":
		return e.newCoordinator(where, args)
	case "hb":
		return e.heartbeat(where, one(e.t, where, pos), args)
	case "leave":
		return e.ready(e.c.Leave(e.now, one(e.t, where, pos)))
	case "tick":
		return e.ready(e.c.Tick(e.now))
	case "queues":
		for t, n := range e.parseCounts(where, one(e.t, where, pos)) {
			e.queues[t] = n
		}
		return nil
	case "describe":
		return e.describe()
	case "summary":
		if e.last == nil {
			return []string{"none"}
		}
		return []string{fmt.Sprintf("%s %s members=%d topics=%s queues=%s", e.last.Group, e.last.MessageModel,
			e.last.Members, strings.Join(e.last.Topics, ","), refs(e.last.Queues))}
	}
	e.t.Fatalf("%s: unknown command %q", where, cmd)
	return nil
}

func isFlag(s string) bool { return s == "double-assign" || s == "moves" || s == "orderly" }

func one(t *testing.T, where string, pos []string) string {
	if len(pos) != 1 {
		t.Fatalf("%s: want one argument, got %q", where, pos)
	}
	return pos[0]
}

func (e *scriptEnv) duration(where, s string) time.Duration { return parseDuration(e.t, where, s) }

func parseDuration(t *testing.T, where, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return d
}

func (e *scriptEnv) newCoordinator(where string, args map[string]string) []string {
	e.group, e.queues, e.members = orDefault(args["group"], "g"), map[string]int32{}, map[string]*scriptMember{}
	e.queues[protocol.RetryTopic(e.group)] = 1
	if q, ok := args["queues"]; ok {
		for t, n := range e.parseCounts(where, q) {
			e.queues[t] = n
		}
	}
	cfg := Config{Group: e.group, Queues: func(t string) int32 { return e.queues[t] }}
	if v, ok := args["interval"]; ok {
		cfg.HeartbeatInterval = e.duration(where, v)
	}
	cfg.Boot = time.UnixMilli(0).Add(e.duration(where, orDefault(args["boot"], "0s")))
	_, cfg.DoubleAssign = args["double-assign"]
	_, e.moves = args["moves"]
	e.c = New(cfg, e.now)
	return []string{fmt.Sprintf("gen %d", e.c.generation)}
}

func (e *scriptEnv) parseCounts(where, s string) map[string]int32 {
	out := map[string]int32{}
	for _, kv := range strings.Split(s, ",") {
		t, n, ok := strings.Cut(kv, ":")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			e.t.Fatalf("%s: bad queue count %q", where, kv)
		}
		out[t] = int32(v)
	}
	return out
}

func (e *scriptEnv) parseRefs(where, s string) []protocol.QueueRef { return parseRefs(e.t, where, s) }

// parseRefs reads "t:0,1;u:2".
func parseRefs(tt *testing.T, where, s string) []protocol.QueueRef {
	var out []protocol.QueueRef
	for _, part := range strings.Split(s, ";") {
		t, ids, ok := strings.Cut(part, ":")
		if !ok {
			tt.Fatalf("%s: bad queues %q", where, part)
		}
		for _, id := range strings.Split(ids, ",") {
			n, err := strconv.Atoi(id)
			if err != nil {
				tt.Fatalf("%s: bad queue id %q", where, id)
			}
			out = append(out, protocol.QueueRef{Topic: t, QueueID: int32(n)})
		}
	}
	return out
}

func (e *scriptEnv) heartbeat(where, id string, args map[string]string) []string {
	m := e.members[id]
	if m == nil {
		m = &scriptMember{}
		e.members[id] = m
	}
	info := protocol.ConsumerGroupInfo{Group: e.group, Subscriptions: []protocol.Subscription{{Topic: "t", Expression: "*"}},
		Owned: m.assigned, Generation: m.gen, MessageModel: args["model"], AllocateStrategy: args["strategy"]}
	_, info.ConsumeOrderly = args["orderly"]
	switch owns := orDefault(args["owns"], "last"); owns {
	case "last":
	case "none":
		info.Owned = nil
	default:
		info.Owned = e.parseRefs(where, owns)
	}
	if g := orDefault(args["gen"], "last"); g != "last" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			e.t.Fatalf("%s: bad gen %q", where, g)
		}
		info.Generation = n
	}
	if subs, ok := args["subs"]; ok {
		info.Subscriptions = nil
		for _, s := range strings.Split(subs, ",") {
			if s != "none" {
				info.Subscriptions = append(info.Subscriptions, protocol.Subscription{Topic: s, Expression: "*"})
			}
		}
	}
	r := e.c.Heartbeat(e.now, id, info, "addr-"+id)
	if r.Assignment.Group != e.group {
		e.t.Fatalf("%s: assignment for group %q", where, r.Assignment.Group)
	}
	m.gen, m.assigned = r.Assignment.Generation, r.Assignment.Queues
	return append([]string{fmt.Sprintf("%s gen=%d %s", id, r.Assignment.Generation, refs(r.Assignment.Queues))}, e.ready(r)...)
}

// ready prints a Ready's outputs (the assignment aside) and checks what
// must hold of every Ready.
func (e *scriptEnv) ready(r Ready) []string {
	var out []string
	if r.Joined {
		out = append(out, "joined")
	}
	if len(r.Left) > 0 {
		out = append(out, "left "+strings.Join(r.Left, " "))
	}
	if len(r.TimedOut) > 0 {
		out = append(out, "timed out "+strings.Join(r.TimedOut, " "))
	}
	if len(r.Notify) > 0 {
		out = append(out, "notify "+strings.Join(r.Notify, " "))
	}
	if !r.Timer.IsZero() {
		out = append(out, "timer "+r.Timer.Sub(time.UnixMilli(0)).String())
	}
	if e.moves {
		for _, m := range r.Moves {
			out = append(out, fmt.Sprintf("move %s %q -> %q target=%q gen=%d grace=%v", ref(m.Queue), m.From, m.To, m.Target, m.Generation, m.Grace))
		}
	}
	if r.Summary != nil {
		e.last = r.Summary
	}
	if !e.c.cfg.DoubleAssign {
		e.checkExclusive()
	}
	return out
}

// checkExclusive: in clustering mode no queue is in two members' assignments.
func (e *scriptEnv) checkExclusive() {
	if e.c.model == protocol.Broadcasting {
		return
	}
	seen := map[protocol.QueueRef]string{}
	for _, id := range e.c.memberIDs() {
		for _, q := range e.c.members[id].assigned {
			if o, ok := seen[q]; ok {
				e.t.Fatalf("queue %s assigned to %s and %s", ref(q), o, id)
			}
			seen[q] = id
		}
	}
}

func (e *scriptEnv) describe() []string {
	d := e.c.Describe()
	out := []string{fmt.Sprintf("%s model=%s strategy=%s orderly=%v gen=%d", d.Group, d.MessageModel, d.AllocateStrategy, d.ConsumeOrderly, d.Generation)}
	for _, m := range d.Members {
		out = append(out, fmt.Sprintf("member %s addr=%s last=%dms %s", m.ClientID, m.Address, m.LastHeartbeatMs, refs(m.Queues)))
	}
	for _, q := range d.Queues {
		s := fmt.Sprintf("queue %s owner=%q", ref(protocol.QueueRef{Topic: q.Topic, QueueID: q.QueueID}), q.Owner)
		if q.Pending != "" {
			s += fmt.Sprintf(" pending=%q", q.Pending)
		}
		out = append(out, s)
	}
	return out
}

func ref(q protocol.QueueRef) string { return fmt.Sprintf("%s:%d", q.Topic, q.QueueID) }

// refs prints queues as "t:0,1 u:2" (topics sorted), "-" if none.
func refs(qs []protocol.QueueRef) string {
	if len(qs) == 0 {
		return "-"
	}
	by := map[string][]string{}
	var topics []string
	for _, q := range qs {
		if by[q.Topic] == nil {
			topics = append(topics, q.Topic)
		}
		by[q.Topic] = append(by[q.Topic], strconv.Itoa(int(q.QueueID)))
	}
	sort.Strings(topics)
	parts := make([]string, len(topics))
	for i, t := range topics {
		parts[i] = t + ":" + strings.Join(by[t], ",")
	}
	return strings.Join(parts, " ")
}
