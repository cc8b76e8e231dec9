package index

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
	"unsafe"
)

// JavaHashCode is Java's String.hashCode of s: h = 31*h + c over the UTF-16
// code units of s, with int32 wrap-around. Runes above U+FFFF count as their
// surrogate pair; each byte of invalid UTF-8 counts as U+FFFD, as Java's
// decoder would read it.
func JavaHashCode(s string) int32 {
	// Only read: the bytes of s are not copied to be hashed.
	return javaHashBytes(0, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// javaHashRune folds one rune into h.
func javaHashRune(h int32, r rune) int32 {
	if r >= 0x10000 {
		r -= 0x10000
		h = 31*h + int32(0xD800+(r>>10))
		return 31*h + int32(0xDC00+(r&0x3FF))
	}
	return 31*h + int32(r)
}

// javaHashBytes continues JavaHashCode over b: javaHashBytes(JavaHashCode(a),
// b) is JavaHashCode(a+string(b)) whenever a does not end inside a UTF-8
// sequence that b's first bytes would complete (a's runes decode alike
// alone and in a+b), which holds when a ends in an ASCII byte.
// utf8.DecodeRune reads invalid bytes as range over a string does: one
// U+FFFD per byte.
//
// Eight ASCII bytes at a time are folded in one step, h*31^8 + b0*31^7 +
// ... + b7 (the same sum, wrapping alike), whose multiplications do not
// wait for each other as the byte at a time loop's do: keys and UNIQ_KEYs
// are mostly ASCII, and this hash was 2 % of the broker's CPU in async-256.
func javaHashBytes(h int32, b []byte) int32 {
	for i := 0; i < len(b); {
		if i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 == 0 {
			u := uint32(h)*pow31[8] + uint32(b[i])*pow31[7] + uint32(b[i+1])*pow31[6] +
				uint32(b[i+2])*pow31[5] + uint32(b[i+3])*pow31[4] + uint32(b[i+4])*pow31[3] +
				uint32(b[i+5])*pow31[2] + uint32(b[i+6])*pow31[1] + uint32(b[i+7])
			h = int32(u)
			i += 8
			continue
		}
		if c := b[i]; c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		h = javaHashRune(h, r)
		i += n
	}
	return h
}

// pow31[k] is 31^k, wrapped to 32 bits as Java's int arithmetic wraps.
var pow31 = [9]uint32{1, 31, 961, 29791, 923521, 28629151, 887503681, 1742810335, 2487512833}

// KeyHash is the hash the index stores for key of topic: keyHash of
// KeyOf(topic, key), without building that string ('#' is ASCII, so the
// topic's runes decode alike in it).
func KeyHash(topic string, key []byte) int32 {
	return nonNegative(javaHashBytes(31*JavaHashCode(topic)+'#', key))
}

// KeyOf is the key under which a message key is indexed: "topic#key".
func KeyOf(topic, key string) string { return topic + "#" + key }

// keyHash is the non-negative hash stored in entries: abs(JavaHashCode), with
// Integer.MIN_VALUE (whose abs is itself in Java) mapped to 0 as RocketMQ does.
func keyHash(key string) int32 { return nonNegative(JavaHashCode(key)) }

// nonNegative is abs(h) with Integer.MIN_VALUE mapped to 0.
func nonNegative(h int32) int32 {
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		return -h
	}
	return h
}
