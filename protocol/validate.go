package protocol

// Validate checks, without allocating, that b is exactly one msgpack value
// whose every declared length or element count is backed by real bytes, whose
// nesting is at most maxDepth containers deep (maxDepth <= 0 means
// DefaultMaxDepth; values above HardMaxDepth are clamped), and that nothing
// follows it.
//
// After Validate passes, no str/bin/ext in b is longer than len(b), no
// array or map has more than len(b) elements (a map of n pairs needs at least
// 2n bytes), and a decoder recurses at most maxDepth deep. This is what makes
// msgpack v5.4.1 safe on untrusted bytes: it allocates whatever a length
// says, before reading the data.
func Validate(b []byte, maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if maxDepth > HardMaxDepth {
		maxDepth = HardMaxDepth
	}
	n, err := walk(b, maxDepth)
	if err != nil {
		return err
	}
	if n != len(b) {
		return ErrInvalidMsgpack // trailing bytes
	}
	return nil
}

// walk returns the length of the one msgpack value at the start of b, after
// checking it as Validate does (trailing bytes are allowed).
func walk(b []byte, maxDepth int) (int, error) {
	// stack[i] counts the values still expected at open level i. Level 0 is
	// the single top-level value. Fixed size: no allocation.
	var stack [HardMaxDepth + 1]int
	depth := 0
	stack[0] = 1
	pos := 0
	for {
		if stack[depth] == 0 {
			if depth == 0 {
				return pos, nil
			}
			depth--
			continue
		}
		stack[depth]--
		if pos >= len(b) {
			return 0, ErrInvalidMsgpack
		}
		c := b[pos]
		pos++
		skip, kids, lenBytes := 0, 0, 0
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
			// positive/negative fixint, nil, false, true
		case c <= 0x8f: // fixmap
			kids = 2 * int(c&0x0f)
		case c <= 0x9f: // fixarray
			kids = int(c & 0x0f)
		case c <= 0xbf: // fixstr
			skip = int(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			lenBytes = 1
		case c == 0xc5 || c == 0xda: // bin16, str16
			lenBytes = 2
		case c == 0xc6 || c == 0xdb: // bin32, str32
			lenBytes = 4
		case c >= 0xc7 && c <= 0xc9: // ext8/16/32: length, then a type byte
			lenBytes, skip = 1<<(c-0xc7), 1
		case c >= 0xca && c <= 0xd3: // float32/64, uint8..64, int8..64
			skip = [...]int{4, 8, 1, 2, 4, 8, 1, 2, 4, 8}[c-0xca]
		case c >= 0xd4 && c <= 0xd8: // fixext1..16: type byte + data
			skip = 1<<(c-0xd4) + 1
		case c == 0xdc || c == 0xde: // array16, map16
			lenBytes = 2
		case c == 0xdd || c == 0xdf: // array32, map32
			lenBytes = 4
		default: // 0xc1 is never used
			return 0, ErrInvalidMsgpack
		}
		if lenBytes > 0 {
			var ok bool
			if skip, kids, pos, ok = sizedLen(b, pos, c, lenBytes, skip); !ok {
				return 0, ErrInvalidMsgpack
			}
		}
		// Every child needs at least one byte, so a count above the bytes
		// left is a lie: reject it before anyone allocates for it.
		if skip > len(b)-pos || kids > len(b)-pos {
			return 0, ErrInvalidMsgpack
		}
		pos += skip
		if kids > 0 {
			if depth >= maxDepth {
				return 0, ErrInvalidMsgpack
			}
			depth++
			stack[depth] = kids
		}
	}
}

// sizedLen reads the lenBytes-byte big-endian length that follows type byte
// c at b[pos:] and turns it into children to expect (array, map) or bytes
// to skip (str, bin, ext: added to skip); it is apart because only the
// sized types take it, so walk's per-value path stays short. ok is false
// when the length runs past b.
func sizedLen(b []byte, pos int, c byte, lenBytes, skip int) (newSkip, kids, newPos int, ok bool) {
	if lenBytes > len(b)-pos {
		return skip, 0, pos, false
	}
	n := 0
	for _, x := range b[pos : pos+lenBytes] {
		n = n<<8 | int(x)
	}
	pos += lenBytes
	switch c {
	case 0xdc, 0xdd:
		return skip, n, pos, true
	case 0xde, 0xdf:
		return skip, 2 * n, pos, true
	}
	return skip + n, 0, pos, true
}
