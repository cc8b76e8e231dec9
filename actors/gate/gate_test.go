package gate

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

var t0 = time.Unix(1_700_000_000, 0)

func mode(flush, role string, isr int) Mode {
	return Mode{SyncFlush: flush == "SYNC_FLUSH", SyncMaster: role == "SYNC_MASTER", InSyncReplicas: isr,
		FlushTimeout: 5 * time.Second, SlaveTimeout: 3 * time.Second}
}

// admit admits a send; a verdict given at once goes where Ready's go, so
// the tests read every verdict one way.
func admit(g *Gate, now time.Time, tok any, end int64, wait bool) {
	if v, ok := g.Admit(now, tok, end, wait); ok {
		immediate = append(immediate, v)
	}
}

var immediate []Verdict

// ready is g.Ready with the verdicts given at once first.
func ready(g *Gate) Ready {
	rd := g.Ready()
	rd.Verdicts = append(immediate, rd.Verdicts...)
	immediate = nil
	return rd
}

// verdicts drains g and returns the verdicts by token.
func verdicts(g *Gate) map[any][]Verdict {
	out := map[any][]Verdict{}
	for _, v := range ready(g).Verdicts {
		out[v.Token] = append(out[v.Token], v)
	}
	return out
}

// TestMatrix runs testdata/matrix.txt: every combination of mode, WAIT and
// what happens after the send is stored, and the single status it gets.
func TestMatrix(t *testing.T) {
	f, err := os.Open("testdata/matrix.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows++
		var flush, role, isrS, slavesS, wait, ev, arrow, want string
		if n, _ := fmtSscan(line, &flush, &role, &isrS, &slavesS, &wait, &ev, &arrow, &want); n != 8 || arrow != "->" {
			t.Fatalf("bad row %q", line)
		}
		isr := int(isrS[len("isr=")] - '0')
		slaves := int(slavesS[len("slaves=")] - '0')
		g := New(mode(flush, role, isr), 0)
		if slaves > 0 {
			g.Replicas(t0, []int64{50}, slaves)
		}
		admit(g, t0, "m", 100, wait == "wait")
		now := t0.Add(time.Millisecond)
		for _, e := range strings.Split(ev, "+") {
			switch e {
			case "none":
			case "flush":
				g.Flushed(now, 100)
			case "fsyncfail":
				g.FlushFailed(now, errors.New("EIO"))
			case "ack":
				g.Replicas(now, []int64{100}, 1)
			case "slavelost":
				g.Replicas(now, nil, 0)
			default:
				t.Fatalf("row %q: unknown event %q", line, e)
			}
		}
		// Tick at every deadline the gate asks for until it has none.
		var got []Verdict
		for i := 0; i < 10; i++ {
			d := ready(g)
			got = append(got, d.Verdicts...)
			if d.Deadline.IsZero() {
				break
			}
			g.Tick(d.Deadline)
		}
		if len(got) != 1 {
			t.Errorf("%s: %d verdicts %v, want exactly one", line, len(got), got)
			continue
		}
		if got[0].Status.String() != want {
			t.Errorf("%s: got %v (%s)", line, got[0].Status, got[0].Remark)
		}
		if g.Waiting() != 0 {
			t.Errorf("%s: %d still waiting", line, g.Waiting())
		}
	}
	if rows < 100 {
		t.Fatalf("only %d rows: the matrix is incomplete", rows)
	}
}

func fmtSscan(line string, dst ...*string) (int, error) {
	fs := strings.Fields(line)
	for i := range dst {
		if i >= len(fs) {
			return i, nil
		}
		*dst[i] = fs[i]
	}
	return len(dst), nil
}

// Group commit: one flush releases every waiter it covers, in order, and no
// other; the rest wait for the next.
func TestFlushReleasesCoveredWaitersOnly(t *testing.T) {
	g := New(mode("SYNC_FLUSH", "ASYNC_MASTER", 1), 0)
	for i, end := range []int64{10, 20, 30, 40} {
		admit(g, t0, i, end, true)
	}
	if v := ready(g).Verdicts; len(v) != 0 {
		t.Fatalf("answered before any flush: %v", v)
	}
	g.Flushed(t0, 25)
	v := ready(g).Verdicts
	if len(v) != 2 || v[0].Token != 0 || v[1].Token != 1 || v[0].Status != protocol.StatusOK {
		t.Fatalf("after flush to 25: %v", v)
	}
	g.Flushed(t0, 20) // an older report changes nothing
	if v := ready(g).Verdicts; len(v) != 0 {
		t.Fatalf("a stale flush answered %v", v)
	}
	g.Flushed(t0, 40)
	if v := ready(g).Verdicts; len(v) != 2 || v[0].Token != 2 || v[1].Token != 3 {
		t.Fatalf("after flush to 40: %v", v)
	}
}

// Deadlines: each waiter times out syncFlushTimeout after its own admission,
// and Ready names the earliest deadline left.
func TestDeadlines(t *testing.T) {
	g := New(mode("SYNC_FLUSH", "ASYNC_MASTER", 1), 0)
	admit(g, t0, "a", 10, true)
	admit(g, t0.Add(2*time.Second), "b", 20, true)
	if d := ready(g).Deadline; !d.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("deadline %v", d)
	}
	g.Tick(t0.Add(5*time.Second - 1))
	if v := ready(g); len(v.Verdicts) != 0 {
		t.Fatalf("early timeout: %v", v.Verdicts)
	}
	g.Tick(t0.Add(5 * time.Second))
	rd := ready(g)
	if len(rd.Verdicts) != 1 || rd.Verdicts[0].Token != "a" || rd.Verdicts[0].Status != protocol.StatusFlushDiskTimeout {
		t.Fatalf("at 5s: %v", rd.Verdicts)
	}
	if !rd.Deadline.Equal(t0.Add(7 * time.Second)) {
		t.Fatalf("next deadline %v", rd.Deadline)
	}
	g.Flushed(t0.Add(6*time.Second), 20)
	if rd := ready(g); len(rd.Verdicts) != 1 || rd.Verdicts[0].Status != protocol.StatusOK || !rd.Deadline.IsZero() {
		t.Fatalf("after the flush: %+v", rd)
	}
}

// A failed fsync is sticky: waiting and later flush waiters all get
// FLUSH_DISK_TIMEOUT, and a later successful-looking flush report does not
// turn one into OK.
func TestFsyncFailureIsSticky(t *testing.T) {
	g := New(mode("SYNC_FLUSH", "ASYNC_MASTER", 1), 0)
	admit(g, t0, 1, 10, true)
	g.FlushFailed(t0, errors.New("EIO"))
	g.Flushed(t0, 100)
	admit(g, t0, 2, 20, true)
	v := ready(g).Verdicts
	if len(v) != 2 || v[0].Status != protocol.StatusFlushDiskTimeout || v[1].Status != protocol.StatusFlushDiskTimeout {
		t.Fatalf("%v", v)
	}
	if !strings.Contains(v[0].Remark, "EIO") {
		t.Fatalf("remark %q does not name the error", v[0].Remark)
	}
}

// Stop answers what is covered OK and the rest with their timeout status,
// and refuses later sends; Drain does the same for a role change.
func TestStopAndDrain(t *testing.T) {
	g := New(mode("SYNC_FLUSH", "SYNC_MASTER", 2), 0)
	g.Replicas(t0, []int64{0}, 1)
	admit(g, t0, "flushed+acked", 10, true)
	admit(g, t0, "acked", 20, true)
	admit(g, t0, "nothing", 30, true)
	g.Replicas(t0, []int64{20}, 1)
	g.Flushed(t0, 10)
	g.Stop(t0)
	admit(g, t0, "late", 40, true)
	got := verdicts(g)
	want := map[string]protocol.Status{"flushed+acked": protocol.StatusOK, "acked": protocol.StatusFlushDiskTimeout,
		"nothing": protocol.StatusFlushDiskTimeout, "late": protocol.StatusServiceNotAvailable}
	for tok, st := range want {
		if v := got[tok]; len(v) != 1 || v[0].Status != st {
			t.Errorf("%s: %v, want %v", tok, v, st)
		}
	}
	g2 := New(mode("ASYNC_FLUSH", "SYNC_MASTER", 2), 0)
	g2.Replicas(t0, []int64{0}, 1)
	admit(g2, t0, "x", 10, true)
	g2.Drain(t0, "role changed to SLAVE")
	v := ready(g2).Verdicts
	if len(v) != 1 || v[0].Status != protocol.StatusFlushSlaveTimeout || !strings.Contains(v[0].Remark, "role changed") {
		t.Fatalf("drain: %v", v)
	}
	admit(g2, t0, "y", 20, false)
	if v := ready(g2).Verdicts; len(v) != 1 || v[0].Status != protocol.StatusOK {
		t.Fatalf("a drained gate still admits: %v", v)
	}
}

// Copies count every slave that acknowledged the offset: with
// inSyncReplicas 3 a send needs two slaves.
func TestCopiesAcrossSlaves(t *testing.T) {
	g := New(mode("ASYNC_FLUSH", "SYNC_MASTER", 3), 0)
	g.Replicas(t0, []int64{0, 0}, 2)
	admit(g, t0, 1, 100, true)
	g.Replicas(t0, []int64{100, 50}, 2)
	if v := ready(g).Verdicts; len(v) != 0 {
		t.Fatalf("one slave's copy was enough: %v", v)
	}
	g.Replicas(t0, []int64{100, 120}, 2)
	if v := ready(g).Verdicts; len(v) != 1 || v[0].Status != protocol.StatusOK {
		t.Fatalf("%v", v)
	}
}

// The planted bugs break exactly the promise they name.
func TestPlantedFaults(t *testing.T) {
	m := mode("SYNC_FLUSH", "ASYNC_MASTER", 1)
	m.AckBeforeFlush = true
	g := New(m, 0)
	admit(g, t0, 1, 10, true)
	if v := ready(g).Verdicts; len(v) != 1 || v[0].Status != protocol.StatusOK {
		t.Fatalf("AckBeforeFlush: %v", v)
	}
	m = mode("SYNC_FLUSH", "ASYNC_MASTER", 1)
	m.NoFlushTimeout = true
	g = New(m, 0)
	admit(g, t0, 1, 10, true)
	if rd := ready(g); !rd.Deadline.IsZero() {
		t.Fatalf("NoFlushTimeout still asks for a tick at %v", rd.Deadline)
	}
	g.Tick(t0.Add(time.Hour))
	if v := ready(g).Verdicts; len(v) != 0 {
		t.Fatalf("NoFlushTimeout timed out: %v", v)
	}
	m = mode("ASYNC_FLUSH", "SYNC_MASTER", 2)
	m.AckBeforeReplica = true
	g = New(m, 0)
	g.Replicas(t0, []int64{0}, 1)
	admit(g, t0, 1, 10, true)
	if v := ready(g).Verdicts; len(v) != 1 || v[0].Status != protocol.StatusOK {
		t.Fatalf("AckBeforeReplica: %v", v)
	}
}

func BenchmarkAdmitFlush(b *testing.B) {
	g := New(mode("SYNC_FLUSH", "ASYNC_MASTER", 1), 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		admit(g, t0, nil, int64(i+1), true)
		if i%32 == 31 {
			g.Flushed(t0, int64(i+1))
			ready(g)
		}
	}
}
