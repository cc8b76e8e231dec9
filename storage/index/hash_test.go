package index

import (
	"math"
	"testing"
	"unicode/utf16"
)

func TestJavaHashCode(t *testing.T) {
	// Values checked against java.lang.String.hashCode (OpenJDK).
	tests := []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322},
		// "TopicTest#KEY1" by hand: h = 31*h + c, wrapped to int32 at each
		// step, over T=84 o=111 p=112 i=105 c=99 T=84 e=101 s=115 t=116
		// #=35 K=75 E=69 Y=89 1=49 (see TestJavaHashCodeByHand).
		{"TopicTest#KEY1", -1656969516},
		// U+1F600 is the surrogate pair D83D DE00: 31*0xD83D + 0xDE00.
		{"\U0001F600", 31*0xD83D + 0xDE00}, // 1772899
		{"é", 0xE9},                        // one UTF-16 unit, not two UTF-8 bytes
		{"polygenelubricants", math.MinInt32},
		{"Aa", 2112},
		{"BB", 2112},
		{"\xff", 0xFFFD}, // invalid UTF-8 reads as U+FFFD
	}
	for _, tt := range tests {
		if got := JavaHashCode(tt.s); got != tt.want {
			t.Errorf("JavaHashCode(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
	if got := JavaHashCode("\U0001F600"); got != 1772899 {
		t.Errorf("JavaHashCode(U+1F600) = %d, want 1772899", got)
	}
}

// javaHashByHand folds the step by step int32 arithmetic of Java, as a second
// derivation of the "TopicTest#KEY1" value above.
func javaHashByHand(units []uint16) int32 {
	var h int64
	for _, c := range units {
		h = int64(int32(31*h + int64(c))) // Java int arithmetic wraps at each step
	}
	return int32(h)
}

func TestJavaHashCodeByHand(t *testing.T) {
	s := "TopicTest#KEY1"
	units := make([]uint16, len(s))
	for i := range s {
		units[i] = uint16(s[i])
	}
	if got, want := JavaHashCode(s), javaHashByHand(units); got != want || want != -1656969516 {
		t.Fatalf("JavaHashCode(%q) = %d, by hand %d, Java -1656969516", s, got, want)
	}
}

func TestKeyHash(t *testing.T) {
	tests := []struct {
		key  string
		want int32
	}{
		{"", 0},
		{"hello", 99162322},
		{"TopicTest#KEY1", 1656969516},
		{"polygenelubricants", 0}, // abs(Integer.MIN_VALUE) is negative in Java; RocketMQ maps it to 0
	}
	for _, tt := range tests {
		if got := keyHash(tt.key); got != tt.want {
			t.Errorf("keyHash(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

// TestKeyHashOfParts: the hash of a key's parts is the hash of KeyOf's
// string, for ASCII, multi-byte, surrogate-pair and invalid UTF-8 keys and
// topics (a topic ending in a torn sequence included); FuzzKeyHash
// explores further.
func TestKeyHashOfParts(t *testing.T) {
	for _, tt := range []struct{ topic, key string }{
		{"", ""}, {"TopicTest", "KEY1"}, {"t", "polygenelubricants"[2:]}, {"T", "é\U0001F600x"},
		{"ab\xe2\x82", "\xac"}, {"topic", "\xff\xfe"}, {"TopicTest", "order-00000042"},
		// eight ASCII bytes at a time, with runs cut by multi-byte and invalid bytes
		{"TopicTest", "7F0000014E2018B4AAC2712A3B800000"}, {"t", "abcdefgh\u00e9abcdefghijklmnop\xffabcdefg"},
		{"t", "1234567\U0001F600"}, {"", "~~~~~~~~~~~~~~~~"},
	} {
		if got, want := KeyHash(tt.topic, []byte(tt.key)), keyHash(KeyOf(tt.topic, tt.key)); got != want {
			t.Errorf("KeyHash(%q, %q) = %d, keyHash of KeyOf %d", tt.topic, tt.key, got, want)
		}
		s := KeyOf(tt.topic, tt.key)
		if got, want := JavaHashCode(s), javaHashByHand(utf16.Encode([]rune(s))); got != want {
			t.Errorf("JavaHashCode(%q) = %d, over its UTF-16 units by hand %d", s, got, want)
		}
	}
}

func FuzzKeyHash(f *testing.F) {
	f.Add("TopicTest", []byte("KEY1"))
	f.Add("ab\xe2\x82", []byte("\xac\U0001F600"))
	f.Add("TopicTest", []byte("7F0000014E2018B4AAC2712A3B800000\u00e9xxxxxxxxx"))
	f.Fuzz(func(t *testing.T, topic string, key []byte) {
		if got, want := KeyHash(topic, key), keyHash(KeyOf(topic, string(key))); got != want {
			t.Fatalf("KeyHash(%q, %q) = %d, keyHash of KeyOf %d", topic, key, got, want)
		}
		s := KeyOf(topic, string(key))
		if got, want := JavaHashCode(s), javaHashByHand(utf16.Encode([]rune(s))); got != want {
			t.Fatalf("JavaHashCode(%q) = %d, over its UTF-16 units by hand %d", s, got, want)
		}
	})
}

// TestPow31: the table of javaHashBytes's eight-byte step is 31^k with
// 32-bit wrap-around.
func TestPow31(t *testing.T) {
	p := uint32(1)
	for k := range pow31 {
		if pow31[k] != p {
			t.Errorf("pow31[%d] = %d, want %d", k, pow31[k], p)
		}
		p *= 31
	}
}

func TestKeyOf(t *testing.T) {
	if got := KeyOf("TopicTest", "KEY1"); got != "TopicTest#KEY1" {
		t.Fatalf("KeyOf = %q", got)
	}
}

func TestHelpers(t *testing.T) {
	for _, ms := range []int64{0, t0, maxNameMs, minNameMs} {
		name := formatName(ms)
		got, ok := parseName(name)
		if len(name) != 17 || !ok || got != ms {
			t.Errorf("formatName(%d) = %q, parsed %d %v", ms, name, got, ok)
		}
	}
	for _, bad := range []string{"", "2023111422132012", "202311142213201234", "2023111422132012x", "20231314221320123"} {
		if _, ok := parseName(bad); ok {
			t.Errorf("parseName(%q) accepted", bad)
		}
	}
	diffs := []struct {
		ts, begin int64
		want      int32
	}{
		{1000, 0, 1}, {999, 0, 0}, {-5, 0, 0}, {0, 1000, 0},
		{math.MaxInt64, math.MinInt64, math.MaxInt32}, // overflows int64 subtraction
		{1000 * math.MaxInt32, 0, math.MaxInt32},
		{1000*math.MaxInt32 + 1000, 0, math.MaxInt32},
	}
	for _, d := range diffs {
		if got := timeDiff(d.ts, d.begin); got != d.want {
			t.Errorf("timeDiff(%d, %d) = %d, want %d", d.ts, d.begin, got, d.want)
		}
	}
	if satAdd(math.MaxInt64, 1) != math.MaxInt64 || satAdd(math.MinInt64, -1) != math.MinInt64 || satAdd(1, 2) != 3 {
		t.Error("satAdd does not saturate")
	}
}
