package index

import "math"

// JavaHashCode is Java's String.hashCode of s: h = 31*h + c over the UTF-16
// code units of s, with int32 wrap-around. Runes above U+FFFF count as their
// surrogate pair; each byte of invalid UTF-8 counts as U+FFFD, as Java's
// decoder would read it.
func JavaHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// KeyOf is the key under which a message key is indexed: "topic#key".
func KeyOf(topic, key string) string { return topic + "#" + key }

// keyHash is the non-negative hash stored in entries: abs(JavaHashCode), with
// Integer.MIN_VALUE (whose abs is itself in Java) mapped to 0 as RocketMQ does.
func keyHash(key string) int32 {
	h := JavaHashCode(key)
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		return -h
	}
	return h
}
