package client

import "github.com/wharfmq/wharf/protocol"

// The reader's memory for answers without a body (a SEND's, most admin
// answers): such a frame's bytes and its Frame are cut from chunks shared
// by many frames, one allocation per chunk instead of two per frame. A
// chunk is never reused, so a frame cut from it stays valid for as long as
// anyone holds it (the garbage collector keeps the chunk). Only small
// frames with no body qualify: a header's decoded strings are copies, so a
// caller keeping a decoded answer keeps no chunk alive, whereas a pull
// answer's messages alias its body (one kept message would keep a chunk of
// other frames alive). A frame with a body gets a buffer of its own.

const (
	// maxArenaFrame is the largest frame cut from a chunk.
	maxArenaFrame = 512
	// arenaChunk is the size of a chunk of frame bytes.
	arenaChunk = 16 << 10
	// arenaFrames is the number of Frames in a chunk of them.
	arenaFrames = 64
)

// frameArena hands out the reader's frame buffers and Frames. It belongs
// to one reader goroutine: no lock.
type frameArena struct {
	bytes  []byte           // what is left of the current chunk
	frames []protocol.Frame // what is left of the current chunk of Frames
}

// buf returns a buffer of n bytes for a frame whose header is hl bytes
// long (its capacity n: appending to it never reaches another frame's).
func (a *frameArena) buf(n, hl int) []byte {
	if n > maxArenaFrame || n != protocol.PrefixSize+hl {
		return make([]byte, n)
	}
	if len(a.bytes) < n {
		a.bytes = make([]byte, arenaChunk)
	}
	b := a.bytes[:n:n]
	a.bytes = a.bytes[n:]
	return b
}

// frame returns a zero Frame to decode into.
func (a *frameArena) frame() *protocol.Frame {
	if len(a.frames) == 0 {
		a.frames = make([]protocol.Frame, arenaFrames)
	}
	f := &a.frames[0]
	a.frames = a.frames[1:]
	return f
}
