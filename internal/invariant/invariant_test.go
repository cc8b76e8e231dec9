package invariant

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// catch runs fn and returns the *Violation it panicked with (nil if it did
// not panic); any other panic value fails the test.
func catch(t *testing.T, fn func()) (v *Violation) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		var ok bool
		if v, ok = r.(*Violation); !ok {
			t.Fatalf("panicked with %T %v, want *Violation", r, r)
		}
	}()
	fn()
	return nil
}

// here is the file:line of its caller, to compare with Violation.Caller.
func here(t *testing.T) string {
	_, file, line, ok := runtime.Caller(1)
	if !ok {
		t.Fatal("no caller")
	}
	return file[strings.LastIndexByte(file, '/')+1:] + ":" + strconv.Itoa(line)
}

// TestChecks: every form passes silently when its condition holds and panics
// with its formatted message and the caller's line when it does not.
func TestChecks(t *testing.T) {
	off, want := int64(4096), int64(8192)
	type pair struct{ a, b int }
	var line string
	tests := []struct {
		name    string
		pass    func()
		fail    func()
		wantMsg string
	}{
		{"Check", func() { Check(off < want, "offset below end") },
			func() { line = here(t); Check(off > want, "offset beyond end") }, "offset beyond end"},
		{"Check1", func() { Check1(off < want, "offset %d", off) },
			func() { line = here(t); Check1(off > want, "offset %d", off) }, "offset 4096"},
		{"Check2", func() { Check2(off < want, "offset %d want %d", off, want) },
			func() { line = here(t); Check2(off > want, "offset %d want %d", off, want) }, "offset 4096 want 8192"},
		{"Check3", func() { Check3(off < want, "%s %v %d", "q", pair{1, 2}, off) },
			func() { line = here(t); Check3(off > want, "%s %v %d", "q", pair{1, 2}, off) }, "q {1 2} 4096"},
		{"Unreachable", func() {},
			func() { line = here(t); Unreachable("role %q", "nobody") }, `role "nobody"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := catch(t, tt.pass); v != nil {
				t.Fatalf("a holding condition panicked: %v", v)
			}
			v := catch(t, tt.fail)
			if v == nil {
				t.Fatal("a broken condition did not panic")
			}
			if v.Msg != tt.wantMsg {
				t.Errorf("Msg = %q, want %q", v.Msg, tt.wantMsg)
			}
			if v.Caller != line {
				t.Errorf("Caller = %q, want the failed check's line %q", v.Caller, line)
			}
			if want := "invariant violated at " + line + ": " + tt.wantMsg; v.Error() != want {
				t.Errorf("Error() = %q, want %q", v.Error(), want)
			}
		})
	}
}

// TestViolationIsAnError: a supervisor that receives the panic reason as an
// error (wrapped or not) can still recognise it.
func TestViolationIsAnError(t *testing.T) {
	v := catch(t, func() { Check(false, "broken") })
	var target *Violation
	if err := fmt.Errorf("actor writer: %w", v); !errors.As(err, &target) || target != v {
		t.Fatalf("errors.As did not find the violation in %v", err)
	}
}

var (
	sinkOffset = int64(1 << 40) // beyond the runtime's preallocated small integers
	sinkTopic  = "orders"
	sinkPair   = struct{ a, b, c int64 }{1, 2, 3}
)

// TestPassingPathAllocatesNothing: checks that hold cost no allocation, with
// arguments that would allocate if boxed (large integers, strings, structs).
func TestPassingPathAllocatesNothing(t *testing.T) {
	checks := map[string]func(){
		"Check":  func() { Check(sinkOffset > 0, "offset positive") },
		"Check1": func() { Check1(sinkOffset > 0, "offset %d", sinkOffset) },
		"Check2": func() { Check2(sinkOffset > 0, "offset %d topic %s", sinkOffset, sinkTopic) },
		"Check3": func() { Check3(sinkOffset > 0, "%d %s %v", sinkOffset, sinkTopic, sinkPair) },
	}
	for name, fn := range checks {
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s: %v allocations per passing check, want 0", name, n)
		}
	}
}

func BenchmarkCheck2(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Check2(sinkOffset > 0, "offset %d topic %s", sinkOffset, sinkTopic)
	}
}

func TestCaught(t *testing.T) {
	if v := Caught(func() {}); v != nil {
		t.Fatalf("a function that returned: %v", v)
	}
	v := Caught(func() { Check1(false, "broken %d", 7) })
	if v == nil || v.Msg != "broken 7" {
		t.Fatalf("caught %+v", v)
	}
	defer func() {
		if p := recover(); p != "other" {
			t.Fatalf("another panic was not passed on: %v", p)
		}
	}()
	Caught(func() { panic("other") })
}
