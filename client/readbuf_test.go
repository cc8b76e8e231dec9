package client

import (
	"reflect"
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

func TestFrameArena(t *testing.T) {
	const hl = 40
	n := protocol.PrefixSize + hl // a frame with no body
	tests := []struct {
		name      string
		n, hl     int
		maxAllocs float64 // per buf, over many
	}{
		{"no body: from a chunk", n, hl, 0.1},
		{"a body: its own buffer", n + 100, hl, 1},
		{"no body but too big: its own buffer", maxArenaFrame + 1, maxArenaFrame + 1 - protocol.PrefixSize, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a frameArena
			got := testing.AllocsPerRun(1000, func() { a.buf(tt.n, tt.hl) })
			if got > tt.maxAllocs || tt.maxAllocs == 1 && got != 1 {
				t.Fatalf("%.2f allocations per buffer, want <= %.2f", got, tt.maxAllocs)
			}
			// Buffers are disjoint and capped: filling or appending to one
			// never writes another's bytes.
			b1, b2 := a.buf(tt.n, tt.hl), a.buf(tt.n, tt.hl)
			if len(b1) != tt.n || cap(b1) != tt.n {
				t.Fatalf("len %d cap %d, want %d", len(b1), cap(b1), tt.n)
			}
			for i := range b2 {
				b2[i] = 2
			}
			for i := range b1 {
				b1[i] = 1
			}
			_ = append(b1, 9)
			for i, c := range b2 {
				if c != 2 {
					t.Fatalf("byte %d of the next buffer overwritten", i)
				}
			}
		})
	}
}

func TestFrameArenaFrames(t *testing.T) {
	var a frameArena
	if got := testing.AllocsPerRun(1000, func() { a.frame() }); got > 0.1 {
		t.Fatalf("%.2f allocations per Frame", got)
	}
	f1, f2 := a.frame(), a.frame()
	if f1 == f2 || !reflect.DeepEqual(*f1, protocol.Frame{}) || !reflect.DeepEqual(*f2, protocol.Frame{}) {
		t.Fatalf("frames not distinct and zero: %p %+v, %p %+v", f1, f1, f2, f2)
	}
}
