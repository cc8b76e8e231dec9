package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrFrame is wrapped by every error about malformed input: the answer is
// an error and the connection is closed (the stream cannot be resynced).
var ErrFrame = errors.New("remoting: malformed frame")

// Default limits: the same as Wharf's own frame decoder.
const (
	DefaultMaxFrameSize  = 16 << 20
	DefaultMaxHeaderSize = 64 << 10
)

// Limits bounds what Split and Decode accept; zero fields mean the
// defaults.
type Limits struct {
	MaxFrameSize  int // the largest frame, counting the 4-byte length word
	MaxHeaderSize int // the largest header
}

func (l Limits) norm() Limits {
	if l.MaxFrameSize <= 0 || l.MaxFrameSize > 1<<31-1 {
		l.MaxFrameSize = DefaultMaxFrameSize
	}
	if l.MaxHeaderSize <= 0 || l.MaxHeaderSize > 1<<24-1 {
		l.MaxHeaderSize = DefaultMaxHeaderSize
	}
	return l
}

// Command is one remoting request or response (RocketMQ's RemotingCommand).
type Command struct {
	Code      int32 // request code, or response code in a response
	Language  byte  // LangJava, LangGo, ...
	Version   int32 // the sender's MQVersion ordinal (the Go client sends 317)
	Opaque    int32 // request id; a response echoes its request's
	Flag      int32 // FlagResponse, FlagOneway
	Remark    string
	ExtFields map[string]string // every custom header field, as a string
	Body      []byte
	// Serialize is the header encoding the command arrived in, or is to be
	// encoded in: SerializeJSON or SerializeRocketMQ.
	Serialize byte
}

// IsResponse reports whether c answers a request.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that wants no answer.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Split reports whether buf starts with a complete frame: its size with
// the length word, or 0 if more bytes are needed. It fails as soon as the
// bytes present prove the frame illegal (see the package doc), and
// allocates nothing but its error.
func Split(buf []byte, lim Limits) (int, error) {
	if len(buf) < 4 {
		return 0, nil
	}
	lim = lim.norm()
	length := int64(binary.BigEndian.Uint32(buf))
	if length+4 > int64(lim.MaxFrameSize) {
		return 0, fmt.Errorf("%w: declared length %d above the limit %d", ErrFrame, length, lim.MaxFrameSize-4)
	}
	if length < 4 {
		return 0, fmt.Errorf("%w: declared length %d leaves no room for the header length", ErrFrame, length)
	}
	if len(buf) >= 8 {
		st, hl := splitHeaderWord(binary.BigEndian.Uint32(buf[4:]))
		if err := checkHeaderWord(st, hl, length, lim); err != nil {
			return 0, err
		}
	}
	if int64(len(buf)) < length+4 {
		return 0, nil
	}
	return int(length + 4), nil
}

func splitHeaderWord(w uint32) (serialize byte, headerLen int64) {
	return byte(w >> 24), int64(w & 0xFFFFFF)
}

func checkHeaderWord(st byte, hl, length int64, lim Limits) error {
	if st != SerializeJSON && st != SerializeRocketMQ {
		return fmt.Errorf("%w: unknown serialize type %d", ErrFrame, st)
	}
	if hl > int64(lim.MaxHeaderSize) {
		return fmt.Errorf("%w: header length %d above the limit %d", ErrFrame, hl, lim.MaxHeaderSize)
	}
	if hl > length-4 {
		return fmt.Errorf("%w: header length %d longer than the frame's %d bytes", ErrFrame, hl, length-4)
	}
	return nil
}

// Decode parses one complete frame (as Split measured it, length word
// included). Body aliases frame.
func Decode(frame []byte, lim Limits) (*Command, error) {
	n, err := Split(frame, lim)
	if err != nil {
		return nil, err
	}
	if n == 0 || n != len(frame) {
		return nil, fmt.Errorf("%w: %d bytes given, the frame declares %d", ErrFrame, len(frame), n)
	}
	st, hl := splitHeaderWord(binary.BigEndian.Uint32(frame[4:]))
	header := frame[8 : 8+hl]
	var c *Command
	switch st {
	case SerializeJSON:
		c, err = decodeJSONHeader(header)
	default:
		c, err = decodeBinaryHeader(header)
	}
	if err != nil {
		return nil, err
	}
	c.Serialize = st
	if body := frame[8+hl:]; len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

// Append encodes c, header in c.Serialize, onto dst. On an error dst is
// returned as it was.
func Append(dst []byte, c *Command) ([]byte, error) { return AppendParts(dst, c, nil) }

// AppendParts is Append with c.Body followed by parts as the body, so a
// body made of pieces (a pull's records) is copied once, into the frame.
func AppendParts(dst []byte, c *Command, parts [][]byte) ([]byte, error) {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	if c.Serialize == SerializeRocketMQ {
		dst = appendBinaryHeader(dst, c)
	} else if dst, err = appendJSONHeader(dst, c); err != nil {
		return dst[:at], err
	}
	hl := len(dst) - at - 8
	if hl > 1<<24-1 {
		return dst[:at], fmt.Errorf("remoting: header of %d bytes does not fit the 24-bit length", hl)
	}
	dst = append(dst, c.Body...)
	for _, p := range parts {
		dst = append(dst, p...)
	}
	if int64(len(dst)-at-4) > 1<<31-1 {
		return dst[:at], fmt.Errorf("remoting: frame of %d bytes too large", len(dst)-at)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	binary.BigEndian.PutUint32(dst[at+4:], uint32(c.Serialize)<<24|uint32(hl))
	return dst, nil
}
