package protocol

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestTagsHashCode(t *testing.T) {
	// Values of Java's String.hashCode.
	cases := map[string]int64{
		"":                   0,
		"a":                  97,
		"TagA":               2598919,
		"hello":              99162322,
		"polygenelubricants": -2147483648, // wraps to Integer.MIN_VALUE
		"é":                  233,
		"😀":                  1772899, // surrogate pair D83D DE00
	}
	for s, want := range cases {
		if got := TagsHashCode(s); got != want {
			t.Errorf("TagsHashCode(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestOffsetMsgID(t *testing.T) {
	cases := []struct {
		host string
		off  int64
		want string
	}{
		{"10.0.0.1:10911", 1 << 33, "0A00000100002A9F0000000200000000"},
		{"127.0.0.1:10911", 0, "7F00000100002A9F0000000000000000"},
		{"[::ffff:192.168.1.2]:80", 255, "C0A8010200000050" + "00000000000000FF"},
		{"[2001:db8::1]:10911", 7, "20010DB8000000000000000000000001" + "00002A9F" + "0000000000000007"},
	}
	for _, c := range cases {
		ap := netip.MustParseAddrPort(c.host)
		id := OffsetMsgID(ap, c.off)
		if id != c.want {
			t.Errorf("OffsetMsgID(%s, %d) = %s, want %s", c.host, c.off, id, c.want)
		}
		if got := string(AppendOffsetMsgID([]byte("prefix"), ap, c.off)); got != "prefix"+c.want {
			t.Errorf("AppendOffsetMsgID(prefix, %s, %d) = %s", c.host, c.off, got)
		}
		if a := testing.AllocsPerRun(10, func() { id = OffsetMsgID(ap, c.off) }); a != 1 && !raceEnabled {
			t.Errorf("OffsetMsgID: %v allocations, want 1 (the string)", a)
		}
		h, off, err := ParseOffsetMsgID(strings.ToLower(id))
		if err != nil || off != c.off || h.Addr() != ap.Addr().Unmap() || h.Port() != ap.Port() {
			t.Errorf("ParseOffsetMsgID(%s) = %v, %d, %v", id, h, off, err)
		}
	}
	for _, bad := range []string{"", "XYZ", strings.Repeat("G", 32), "7F000001000100000000000000000000"[:31], "7F00000100010000" + "8000000000000000", "7F00000110000000" + "0000000000000000"} {
		if _, _, err := ParseOffsetMsgID(bad); err == nil {
			t.Errorf("ParseOffsetMsgID(%q) accepted", bad)
		}
	}
}

func TestUniqID(t *testing.T) {
	p := MakeUniqIDPrefix(netip.MustParseAddr("10.1.2.3"), 0x12345, 0xDEADBEEF)
	if got, want := UniqID(p, 0x01020304, 0xABCD), "0A0102032345DEADBEEF01020304ABCD"; got != want {
		t.Fatalf("UniqID = %s, want %s", got, want)
	}
	g := &UniqIDGenerator{Prefix: p, BaseMs: 1000}
	a, b := g.Next(1005), g.Next(1005)
	if a == b || len(a) != 32 || a[20:28] != "00000005" {
		t.Fatalf("ids %s %s", a, b)
	}
}

func TestTagExpr(t *testing.T) {
	good := []struct {
		in      string
		all     bool
		tags    []string
		matches []string
		misses  []string
	}{
		{"*", true, nil, []string{"", "a"}, nil},
		{"", true, nil, []string{"x"}, nil},
		{"  *  ", true, nil, []string{"x"}, nil},
		{"a", false, []string{"a"}, []string{"a"}, []string{"", "b", "a ", "A"}},
		{"b || a||c ||a", false, []string{"a", "b", "c"}, []string{"a", "b", "c"}, []string{"d", "a||b"}},
	}
	for _, c := range good {
		e, err := ParseTagExpr(c.in)
		if err != nil {
			t.Fatalf("ParseTagExpr(%q): %v", c.in, err)
		}
		if e.All != c.all || !reflect.DeepEqual(e.Tags, c.tags) {
			t.Errorf("ParseTagExpr(%q) = %+v", c.in, e)
		}
		for i, tag := range e.Tags {
			if e.Codes[i] != TagsHashCode(tag) || !e.MatchesCode(TagsHashCode(tag)) {
				t.Errorf("%q: code of %q", c.in, tag)
			}
		}
		for _, m := range c.matches {
			if !e.Matches(m) {
				t.Errorf("%q should match %q", c.in, m)
			}
		}
		for _, m := range c.misses {
			if e.Matches(m) {
				t.Errorf("%q should not match %q", c.in, m)
			}
		}
		if again, _ := ParseTagExpr(e.String()); !reflect.DeepEqual(again, e) {
			t.Errorf("String() of %q does not parse back", c.in)
		}
	}
	for _, bad := range []string{"||", "a ||", "|| a", "a || || b", "a | b", "a || *", "a b", "a*", strings.Repeat("a", MaxTagExprLength+1)} {
		if _, err := ParseTagExpr(bad); err == nil {
			t.Errorf("ParseTagExpr(%q) accepted", bad)
		}
	}
}

func TestMessageProperties(t *testing.T) {
	var m Message
	if !m.WaitStoreMsgOK() || m.DelayLevel() != 0 || m.Tags() != "" || m.Keys() != nil {
		t.Fatal("zero message defaults")
	}
	m.SetTags("paid")
	m.SetKeys("k1", "k2 k3", " ")
	m.SetUniqKey("ID")
	m.SetDelayLevel(3)
	m.SetWaitStoreMsgOK(false)
	want := map[string]string{"TAGS": "paid", "KEYS": "k1 k2 k3", "UNIQ_KEY": "ID", "DELAY": "3", "WAIT": "false"}
	if !reflect.DeepEqual(m.Properties, want) {
		t.Fatalf("properties %v", m.Properties)
	}
	if m.Tags() != "paid" || !reflect.DeepEqual(m.Keys(), []string{"k1", "k2", "k3"}) || m.UniqKey() != "ID" || m.DelayLevel() != 3 || m.WaitStoreMsgOK() {
		t.Fatal("getters")
	}
	m.SetDelayLevel(0)
	m.SetWaitStoreMsgOK(true)
	if _, ok := m.Properties["DELAY"]; ok {
		t.Fatal("DELAY kept")
	}
	if _, ok := m.Properties["WAIT"]; ok {
		t.Fatal("WAIT kept")
	}
}

func TestMessageValidate(t *testing.T) {
	ok := Message{Topic: "Or-ders_%|1", Body: make([]byte, 10)}
	if err := ok.Validate(Limits{}); err != nil {
		t.Fatal(err)
	}
	// The largest properties a record holds: 32767 less the record CRC
	// property the broker adds (PROTOCOL.md 6.3).
	full := Message{Topic: "t", Properties: map[string]string{"k": strings.Repeat("v", 32747-3)}}
	if err := full.Validate(Limits{}); err != nil {
		t.Fatalf("32747 bytes of properties: %v", err)
	}
	bad := []Message{
		{Topic: ""},
		{Topic: "a b"},
		{Topic: strings.Repeat("t", 128)},
		{Topic: "t", Body: make([]byte, DefaultMaxMessageSize+1)},
		{Topic: "t", Properties: map[string]string{"": "x"}},
		{Topic: "t", Properties: map[string]string{"k": "a\x01b"}},
		{Topic: "t", Properties: map[string]string{"k": strings.Repeat("v", 32747-2)}},
	}
	for i, m := range bad {
		if err := m.Validate(Limits{}); !errors.Is(err, ErrMessageIllegal) {
			t.Errorf("case %d: %v", i, err)
		}
	}
}

func TestStatusPredicates(t *testing.T) {
	for s := range statusNames {
		if s.String() == "" || strings.HasPrefix(s.String(), "STATUS(") {
			t.Errorf("%d has no name", s)
		}
		if s.Stored() && s.Retryable() {
			t.Errorf("%v is both stored and retryable", s)
		}
	}
	for _, s := range []Status{StatusFlushDiskTimeout, StatusFlushSlaveTimeout, StatusSlaveNotAvailable} {
		if !s.Stored() || !s.Unconfirmed() {
			t.Errorf("%v", s)
		}
	}
	if !StatusOK.Stored() || StatusOK.Unconfirmed() || StatusSystemBusy.Stored() || StatusMessageIllegal.Retryable() {
		t.Error("predicates")
	}
	if Status(12345).String() != "STATUS(12345)" || Code(999).String() != "CODE(999)" {
		t.Error("unknown names")
	}
	if !StatusFrameIllegal.ClosesConnection() || StatusSystemError.ClosesConnection() {
		t.Error("ClosesConnection")
	}
	want := map[Status]PullStatus{StatusOK: PullFound, StatusPullNotFound: PullNoNewMsg,
		StatusPullRetryImmediately: PullNoMatchedMsg, StatusPullOffsetMoved: PullOffsetIllegal, StatusSystemBusy: PullError}
	for s, p := range want {
		if PullStatusOf(s) != p {
			t.Errorf("PullStatusOf(%v) = %v", s, PullStatusOf(s))
		}
	}
}
