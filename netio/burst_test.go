package netio

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

func TestCopyBurst(t *testing.T) {
	in := []byte("some frames")
	data, box, release := copyBurst(in, nil)
	if !bytes.Equal(data, in) || &data[0] == &in[0] || release != nil || box != nil {
		t.Fatalf("without spares: %q, release %v", data, release != nil)
	}
	var bufs burstBufs
	data, box, release = copyBurst(in, &bufs)
	if !bytes.Equal(data, in) || &data[0] == &in[0] || release == nil || box == nil {
		t.Fatalf("with spares: %q, release %v", data, release != nil)
	}
	release()
	release() // a second call must not keep the buffer twice
	again, _, _ := copyBurst([]byte("more"), &bufs)
	other, _, _ := copyBurst([]byte("more"), &bufs)
	if &again[0] != &data[0] || &other[0] == &data[0] {
		t.Fatal("a released buffer was not reused once, and only once")
	}
	bufs.put(&burstBox{buf: []byte{1}}) // too small for what comes next: dropped on take
	if p := bufs.take(64); p != nil {
		t.Fatalf("took a spare of %d bytes for 64", cap(p.buf))
	}
	bufs.put(&burstBox{buf: make([]byte, 0, maxSpareBurst+1)})
	if p := bufs.take(1); p != nil {
		t.Fatal("a huge buffer was kept")
	}
	for range spareBursts + 2 {
		bufs.put(&burstBox{buf: make([]byte, 0, 8)})
	}
	n := 0
	for bufs.take(1) != nil {
		n++
	}
	if n != spareBursts {
		t.Fatalf("%d spares kept, want %d", n, spareBursts)
	}
}

func TestBurstCap(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, minBurstBuf}, {1, minBurstBuf}, {minBurstBuf, minBurstBuf}, {minBurstBuf + 1, 2 * minBurstBuf},
		{64 << 10, 64 << 10}, {64<<10 + 1, 128 << 10},
	} {
		if got := burstCap(tc.n); got != tc.want {
			t.Errorf("burstCap(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestSendsOnly(t *testing.T) {
	send, batch, pull := &protocol.Frame{Code: protocol.CodeSendMessage}, &protocol.Frame{Code: protocol.CodeSendBatchMessage}, &protocol.Frame{Code: protocol.CodePullMessage}
	for _, tc := range []struct {
		frames []*protocol.Frame
		want   bool
	}{
		{nil, false},
		{[]*protocol.Frame{send}, true},
		{[]*protocol.Frame{send, batch, send}, true},
		{[]*protocol.Frame{send, pull}, false},
		{[]*protocol.Frame{pull}, false},
	} {
		if got := sendsOnly(tc.frames); got != tc.want {
			t.Errorf("%d frames: %v, want %v", len(tc.frames), got, tc.want)
		}
	}
}

// keepMixed releases bursts of sends (as the broker does after the append)
// and keeps every other burst's frames, checking them later.
type keepMixed struct {
	mu       sync.Mutex
	kept     []*protocol.Frame
	want     []string
	bursts   int
	released int
}

func (h *keepMixed) Deliver(in *actors.Inbound) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bursts++
	if sendsOnly(in.Frames) && in.Release != nil {
		h.released++
		in.Release()
		return
	}
	for _, f := range in.Frames {
		h.kept = append(h.kept, f)
		h.want = append(h.want, string(f.Body))
	}
}

func (h *keepMixed) Disconnected(actors.Conn) {}

// A burst that is not released keeps its bytes while the connection's
// later bursts reuse pooled buffers: a mixed burst after sends (read into a
// pooled buffer on the guess that it is sends again) is never handed out
// again.
func TestUnreleasedBurstKeepsItsBytes(t *testing.T) {
	h := &keepMixed{}
	s := startServer(t, h, Options{})
	c := dial(t, s)
	frame := func(code protocol.Code, op uint32, body string) []byte {
		return protocol.AppendFrame(nil, &protocol.Frame{Code: code, Opaque: op, Body: []byte(body)})
	}
	const rounds = 20
	for i := range rounds {
		var sends []byte
		for j := range 8 {
			sends = append(sends, frame(protocol.CodeSendMessage, uint32(i*100+j), fmt.Sprintf("send %d.%d", i, j))...)
		}
		mixed := append(frame(protocol.CodeSendMessage, uint32(i*100+50), fmt.Sprintf("kept send %d", i)),
			frame(protocol.CodePullMessage, uint32(i*100+51), fmt.Sprintf("kept pull %d", i))...)
		for _, burst := range [][]byte{sends, sends, mixed} { // the second is pooled, and the mixed one
			want := h.count() + 1
			if _, err := c.Write(burst); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, testwait.Wall, 5*time.Second, "the burst delivered", func() bool { return h.count() >= want })
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released < rounds || len(h.kept) < 2*rounds {
		t.Fatalf("%d bursts, %d released, %d frames kept: the test did not exercise the pool", h.bursts, h.released, len(h.kept))
	}
	for i, f := range h.kept {
		if string(f.Body) != h.want[i] {
			t.Fatalf("kept frame %d now reads %q, was %q", i, f.Body, h.want[i])
		}
	}
}

func (h *keepMixed) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bursts
}

// TestBurstFramesReused: a spare gives back its frame slices with its
// buffer, cleared, and a burst with more frames than they hold gets new
// ones; without a spare (a burst that is not released) they are new.
func TestBurstFramesReused(t *testing.T) {
	var bufs burstBufs
	_, box, release := copyBurst([]byte("four frames"), &bufs)
	frames, arena := burstFrames(box, 4, true)
	if cap(frames) < 4 || len(frames) != 0 || len(arena) != 4 {
		t.Fatalf("frames len %d cap %d, arena %d", len(frames), cap(frames), len(arena))
	}
	arena[0].Remark = "held"
	box.frames = append(frames, &arena[0])
	release()
	_, again, _ := copyBurst([]byte("three"), &bufs)
	f2, a2 := burstFrames(again, 3, true)
	if again != box || &a2[0] != &arena[0] || cap(f2) != cap(frames) {
		t.Fatal("a released spare's frame slices were not reused")
	}
	if a2[0].Remark != "" || box.frames[:1][0] != nil {
		t.Fatal("a released spare kept the last burst's frames")
	}
	if f3, a3 := burstFrames(again, 9, true); cap(f3) < 9 || len(a3) != 9 || &a3[0] == &arena[0] {
		t.Fatal("a larger burst did not get larger slices")
	}
	if f4, a4 := burstFrames(nil, 2, false); cap(f4) < 2 || a4 != nil {
		t.Fatal("without a spare: want new frames and no arena unless asked")
	}
}
