package vtime

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestOrder: ready work runs first, FIFO; then timers by time, ties in the
// order armed; a canceled timer and a dead owner's work never run.
func TestOrder(t *testing.T) {
	dead := map[int]bool{2: true}
	l := New(t0, Options[int]{Alive: func(o int) bool { return !dead[o] }})
	var got []string
	log := func(s string) func() { return func() { got = append(got, fmt.Sprintf("%s@%v", s, l.Now().Sub(t0))) } }
	l.At(t0.Add(2*time.Second), 0, log("t2"))
	l.At(t0.Add(time.Second), 0, log("t1a"))
	l.At(t0.Add(time.Second), 0, log("t1b"))
	cancel := l.At(t0.Add(time.Second), 0, log("canceled"))
	l.At(t0, 2, log("dead"))
	l.Schedule(0, log("r1"))
	l.Schedule(2, log("deadready"))
	l.Schedule(1, func() { log("r2")(); l.Schedule(0, log("r3")) })
	if !cancel() || cancel() {
		t.Fatal("cancel reports pending once")
	}
	l.Run(t0.Add(1500*time.Millisecond), nil)
	want := "[r1@0s r2@0s r3@0s t1a@1s t1b@1s]"
	if fmt.Sprint(got) != want || l.Now() != t0.Add(1500*time.Millisecond) {
		t.Fatalf("ran %v, now %v; want %s at 1.5s", got, l.Now().Sub(t0), want)
	}
}

// TestRunUntil: it stops as soon as the condition holds, and fails at the
// virtual limit instead of hanging.
func TestRunUntil(t *testing.T) {
	l := NewFIFO(t0)
	c := &Clock[None]{L: l}
	done := false
	c.AfterFunc(300*time.Millisecond, func() { done = true })
	c.AfterFunc(time.Hour, func() { t.Fatal("ran past the condition") })
	if !l.RunUntil(func() bool { return done }, time.Second) || l.Now() != t0.Add(300*time.Millisecond) {
		t.Fatalf("RunUntil: done %v at %v", done, l.Now().Sub(t0))
	}
	if l.RunUntil(func() bool { return false }, time.Second) || l.Now() != t0.Add(1300*time.Millisecond) {
		t.Fatalf("RunUntil of a condition that never holds ended at %v", l.Now().Sub(t0))
	}
	var spin func()
	spin = func() { l.Schedule(None{}, spin) }
	spin()
	if l.RunUntil(func() bool { return false }, time.Second) {
		t.Fatal("work spinning at one instant satisfied RunUntil")
	}
}

// TestPick: a Pick chooses among ready work (the simulator's seed).
func TestPick(t *testing.T) {
	l := New(t0, Options[None]{Pick: func(n int) int { return n - 1 }})
	var got []int
	for i := range 3 {
		l.Schedule(None{}, func() { got = append(got, i) })
	}
	l.Run(t0, nil)
	if fmt.Sprint(got) != "[2 1 0]" {
		t.Fatalf("picked %v", got)
	}
}
