// Command tracewait reads an execution trace (`wharf bench --profile DIR
// --trace`, or any runtime/trace file) and reports where goroutines
// waited: the longest runnable and in-syscall stretches with their stacks,
// how many runnable waits passed 1 and 5 ms, and how often a goroutine's
// runtime.Gosched ran the same goroutine again although another one was
// readied on its P (the scheduler's fairness check of the global queue,
// one schedule in 61). With -window it prints every goroutine and P
// transition in a span instead.
//
//	cd bench && go run ./tracewait [-min MS] [-n N] [-depth FRAMES] FILE
//	cd bench && go run ./tracewait -window AT_MS,WIDTH_MS FILE
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/exp/trace"
)

type span struct {
	g        trace.GoID
	proc     trace.ProcID // where it was readied (runnable spans)
	from, to trace.Time
	kind     string
	stack    string
}

func (s span) ms() float64 { return float64(s.to-s.from) / 1e6 }

func main() {
	minMs := flag.Float64("min", 2, "list waits longer than this, in ms")
	n := flag.Int("n", 25, "list at most this many waits")
	depth := flag.Int("depth", 5, "frames of each listed stack")
	window := flag.String("window", "", "AT_MS,WIDTH_MS: print every transition in this span (ms from the trace's start)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: tracewait [-min MS] [-n N] [-window AT,WIDTH] FILE")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		fail(err)
	}
	if *window != "" {
		var at, width float64
		if _, err := fmt.Sscanf(*window, "%g,%g", &at, &width); err != nil {
			fail(fmt.Errorf("-window %q: want AT_MS,WIDTH_MS", *window))
		}
		printWindow(r, at, width)
		return
	}
	a := newAnalysis()
	a.depth = *depth
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
		}
		a.event(&ev)
	}
	a.report(*minMs, *n)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tracewait:", err)
	os.Exit(1)
}

// top is the innermost n frames of st, package paths cut.
func top(st trace.Stack, n int) string {
	var parts []string
	for fr := range st.Frames() {
		fn := fr.Func
		if i := strings.LastIndex(fn, "/"); i >= 0 {
			fn = fn[i+1:]
		}
		parts = append(parts, fn)
		if len(parts) >= n {
			break
		}
	}
	return strings.Join(parts, " < ")
}

type analysis struct {
	depth       int // frames of a syscall's stack
	first, last trace.Time
	runnable    map[trace.GoID]span // readied, not yet running
	syscall     map[trace.GoID]span // in a syscall
	waits       []span
	// Gosched with another goroutine readied on the same P: did the
	// yielding goroutine run again first?
	yielded            map[trace.ProcID]trace.GoID
	yields, selfPicked int
}

func newAnalysis() *analysis {
	return &analysis{runnable: map[trace.GoID]span{}, syscall: map[trace.GoID]span{}, yielded: map[trace.ProcID]trace.GoID{}}
}

func (a *analysis) event(ev *trace.Event) {
	if a.first == 0 {
		a.first = ev.Time()
	}
	a.last = ev.Time()
	if ev.Kind() != trace.EventStateTransition {
		return
	}
	st := ev.StateTransition()
	if st.Resource.Kind != trace.ResourceGoroutine {
		return
	}
	g := st.Resource.Goroutine()
	from, to := st.Goroutine()
	switch {
	case to == trace.GoRunnable:
		if from == trace.GoRunning && strings.Contains(top(ev.Stack(), 1), "Gosched") && a.readiedOn(ev.Proc(), g) {
			a.yielded[ev.Proc()] = g
		}
		a.runnable[g] = span{g: g, proc: ev.Proc(), from: ev.Time(), kind: "runnable", stack: top(ev.Stack(), 4)}
	case from == trace.GoRunnable && to == trace.GoRunning:
		if y, ok := a.yielded[ev.Proc()]; ok {
			a.yields++
			if y == g {
				a.selfPicked++
			}
			delete(a.yielded, ev.Proc())
		}
		if s, ok := a.runnable[g]; ok {
			s.to = ev.Time()
			a.waits = append(a.waits, s)
			delete(a.runnable, g)
		}
	}
	if to == trace.GoSyscall {
		a.syscall[g] = span{g: g, from: ev.Time(), kind: "syscall", stack: top(ev.Stack(), a.depth)}
	}
	if from == trace.GoSyscall {
		if s, ok := a.syscall[g]; ok {
			s.to = ev.Time()
			a.waits = append(a.waits, s)
			delete(a.syscall, g)
		}
	}
}

// readiedOn reports whether a goroutine other than g waits runnable,
// readied on p.
func (a *analysis) readiedOn(p trace.ProcID, g trace.GoID) bool {
	for other, s := range a.runnable {
		if other != g && s.proc == p {
			return true
		}
	}
	return false
}

func (a *analysis) report(minMs float64, n int) {
	sort.Slice(a.waits, func(i, j int) bool { return a.waits[i].ms() > a.waits[j].ms() })
	fmt.Printf("trace: %.1f ms\n", float64(a.last-a.first)/1e6)
	for i, w := range a.waits {
		if i >= n || w.ms() < minMs {
			break
		}
		fmt.Printf("%8.2f ms at %9.2f ms  g%-6d %-8s %s\n", w.ms(), float64(w.from-a.first)/1e6, w.g, w.kind, w.stack)
	}
	var over1, over5 int
	var sum float64
	for _, w := range a.waits {
		if w.kind == "runnable" && w.ms() > 1 {
			over1++
			sum += w.ms()
			if w.ms() > 5 {
				over5++
			}
		}
	}
	fmt.Printf("runnable waits over 1 ms: %d (over 5 ms: %d), %.1f ms in all\n", over1, over5, sum)
	fmt.Printf("Gosched with another goroutine readied on its P: %d, the yielding goroutine ran again first: %d\n", a.yields, a.selfPicked)
}

// printWindow prints every goroutine and P transition in [at, at+width] ms.
func printWindow(r *trace.Reader, at, width float64) {
	var first trace.Time
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			return
		}
		if err != nil {
			fail(err)
		}
		if first == 0 {
			first = ev.Time()
		}
		t := float64(ev.Time()-first) / 1e6
		if t < at || t > at+width || ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case trace.ResourceGoroutine:
			from, to := st.Goroutine()
			fmt.Printf("%9.3f P%-2d M%-6d g%-6d %v->%v %s | %s\n", t, ev.Proc(), ev.Thread(), st.Resource.Goroutine(), from, to, st.Reason, top(ev.Stack(), 3))
		case trace.ResourceProc:
			from, to := st.Proc()
			fmt.Printf("%9.3f P%-2d M%-6d proc %d %v->%v\n", t, ev.Proc(), ev.Thread(), st.Resource.Proc(), from, to)
		}
	}
}
