package dispatch

import "testing"

func TestSearchOffset(t *testing.T) {
	// Store times of offsets 10 … 16; 10 cannot be read (its file was
	// removed by retention after the bounds were taken).
	times := map[int64]int64{11: 100, 12: 100, 13: 200, 14: 300, 15: 300, 16: 400}
	read := func(off int64) (int64, bool) { at, ok := times[off]; return at, ok }
	cases := []struct {
		lo, hi, ts, want int64
	}{
		{11, 17, 0, 11},   // before everything: the first offset
		{11, 17, 100, 11}, // the first of equal times
		{11, 17, 101, 13}, // between: the later message
		{11, 17, 300, 14},
		{11, 17, 400, 16}, // the last message
		{11, 17, 401, 17}, // after everything: the max offset
		{10, 17, 0, 11},   // the unreadable 10 counts as earlier
		{10, 10, 0, 10},   // an empty queue
		{13, 17, 100, 13}, // the min offset moved past the match
	}
	for _, c := range cases {
		n := 0
		got := SearchOffset(c.lo, c.hi, c.ts, func(off int64) (int64, bool) {
			if off < c.lo || off >= c.hi {
				t.Fatalf("read offset %d outside [%d, %d)", off, c.lo, c.hi)
			}
			n++
			return read(off)
		})
		if got != c.want || n > 4 {
			t.Errorf("SearchOffset(%d, %d, %d) = %d after %d reads, want %d", c.lo, c.hi, c.ts, got, n, c.want)
		}
	}
}
