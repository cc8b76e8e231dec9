package index

import (
	"math"
	"unicode/utf8"
)

// JavaHashCode is Java's String.hashCode of s: h = 31*h + c over the UTF-16
// code units of s, with int32 wrap-around. Runes above U+FFFF count as their
// surrogate pair; each byte of invalid UTF-8 counts as U+FFFD, as Java's
// decoder would read it.
func JavaHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		h = javaHashRune(h, r)
	}
	return h
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
func javaHashBytes(h int32, b []byte) int32 {
	for i := 0; i < len(b); {
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
