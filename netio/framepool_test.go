package netio

import "testing"

// reserve keeps a buffer with room, replaces one without, and keeps what
// was already in it.
func TestReserve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dst     []byte
		n       int
		same    bool
		wantCap int
	}{
		{"nil", nil, 100, false, 100},
		{"room enough", make([]byte, 0, 200), 100, true, 200},
		{"too small", make([]byte, 0, 50), 100, false, 100},
		{"prefix kept", append(make([]byte, 0, 4), 1, 2, 3), 10, false, 13},
	} {
		got := reserve(tc.dst, tc.n)
		if same := cap(tc.dst) > 0 && &got[:1][0] == &tc.dst[:1][0]; same != tc.same {
			t.Errorf("%s: same buffer %v, want %v", tc.name, same, tc.same)
		}
		if cap(got) < tc.wantCap || len(got) != len(tc.dst) || string(got) != string(tc.dst) {
			t.Errorf("%s: len %d cap %d %v, want len %d cap >= %d", tc.name, len(got), cap(got), got, len(tc.dst), tc.wantCap)
		}
	}
}

// The pool gives back empty buffers and does not keep huge ones.
func TestFramePool(t *testing.T) {
	putFrame(make([]byte, 10, maxPooledFrame+1))
	for range 3 { // a pool may drop what it was given; it must never hand back the huge one
		if b := getFrame(); cap(b) > maxPooledFrame {
			t.Fatalf("the pool kept a %d-byte buffer", cap(b))
		}
	}
	putFrame(make([]byte, 10, 64))
	if b := getFrame(); len(b) != 0 {
		t.Fatalf("a pooled buffer of length %d", len(b))
	}
}

// Putting a buffer back and taking it again allocates nothing: the pool's
// boxes are reused (a new box per put was one allocation per answer).
func TestFramePoolNoAllocs(t *testing.T) {
	putFrame(make([]byte, 0, 64))
	if a := testing.AllocsPerRun(100, func() {
		b := getFrame()
		if b == nil {
			b = make([]byte, 0, 64) // the pool may drop what it holds at a GC
		}
		putFrame(append(b, 1))
	}); a != 0 {
		t.Fatalf("%v allocations per get and put", a)
	}
}
