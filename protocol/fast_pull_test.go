package protocol

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// pullFieldsGeneric is PullResponse's fields map without the fast codec:
// unmarshalFields decodes it with Validate, msgpack.Unmarshal and
// checkInts, the generic decoder the fast one must match.
// TestPullFieldsGenericMirrors keeps it PullResponse's twin.
type pullFieldsGeneric struct {
	NextBeginOffset      int64 `msgpack:"nextBeginOffset"`
	MinOffset            int64 `msgpack:"minOffset"`
	MaxOffset            int64 `msgpack:"maxOffset"`
	SuggestWhichBrokerID int64 `msgpack:"suggestWhichBrokerId"`
}

func (*pullFieldsGeneric) isFields() {}

func TestPullFieldsGenericMirrors(t *testing.T) {
	fast, generic := reflect.TypeFor[PullResponse](), reflect.TypeFor[pullFieldsGeneric]()
	var want []reflect.StructField
	for i := range fast.NumField() {
		if f := fast.Field(i); f.Tag.Get("msgpack") != "-" {
			want = append(want, f)
		}
	}
	if len(want) != generic.NumField() {
		t.Fatalf("PullResponse has %d encoded fields, pullFieldsGeneric %d", len(want), generic.NumField())
	}
	for i, f := range want {
		g := generic.Field(i)
		if f.Name != g.Name || f.Type != g.Type || f.Tag != g.Tag {
			t.Errorf("field %d: PullResponse %s %v %q, pullFieldsGeneric %s %v %q", i, f.Name, f.Type, f.Tag, g.Name, g.Type, g.Tag)
		}
	}
}

// decodePullGeneric decodes a pull answer as the generic decoders do:
// decodeInto's rules, the fields by reflection, the body as a query
// answer's list (properties into maps).
func decodePullGeneric(f *Frame, lim Limits) (*PullResponse, error) {
	lim = lim.norm()
	var g pullFieldsGeneric
	err := unmarshalFields(f.Fields, lim, &g)
	if StatusOf(err) == StatusFrameIllegal {
		return nil, err
	}
	msgs, berr := decodeMessageExtList(f.Body, lim, false)
	if berr != nil && (err == nil || StatusOf(berr) == StatusFrameIllegal) {
		return nil, berr
	}
	if err != nil {
		return nil, err
	}
	return &PullResponse{NextBeginOffset: g.NextBeginOffset, MinOffset: g.MinOffset, MaxOffset: g.MaxOffset,
		SuggestWhichBrokerID: g.SuggestWhichBrokerID, Messages: msgs}, nil
}

// comparePullDecoders decodes one frame with the fast and the generic
// decoder and reports how they disagree ("" if they do not).
func comparePullDecoders(f *Frame, lim Limits) string {
	var fast PullResponse
	errF := DecodeResponse(f, lim, &fast)
	generic, errG := decodePullGeneric(f, lim)
	switch {
	case (errF == nil) != (errG == nil):
		return fmt.Sprintf("fast: %v; generic: %v", errF, errG)
	case errF != nil:
		if StatusOf(errF) != StatusOf(errG) {
			return fmt.Sprintf("fast: %v (%v); generic: %v (%v)", errF, StatusOf(errF), errG, StatusOf(errG))
		}
		return ""
	}
	for i := range fast.Messages {
		m := &fast.Messages[i]
		if m.Properties != nil {
			return fmt.Sprintf("message %d: properties decoded into a map", i)
		}
		if got, want := m.PropertyMap(), generic.Messages[i].Properties; !maps.Equal(got, want) || (got == nil) != (want == nil) {
			return fmt.Sprintf("message %d: properties %v, generic %v", i, got, want)
		}
	}
	if !reflect.DeepEqual(&fast, generic) {
		return fmt.Sprintf("fast %+v\ngeneric %+v", &fast, generic)
	}
	return ""
}

// pullSeeds are the fields and bodies of pull answers as this package and
// other encoders write them.
func pullSeeds(t testing.TB) [][2][]byte {
	fields := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var out [][2][]byte
	add := func(frame []byte) {
		f, err := DecodeFrame(frame, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, [2][]byte{f.Fields, f.Body})
	}
	add(goldenFrames(t)["pull_response"])
	ext := sampleExt
	ext.Body = nil
	for _, r := range []*PullResponse{
		{NextBeginOffset: 44, MaxOffset: 44, Messages: []MessageExt{sampleExt, ext}},
		{NextBeginOffset: 10, MinOffset: 10, MaxOffset: 44, SuggestWhichBrokerID: 1},
	} {
		b, err := AppendResponse(nil, CodePullMessage, 1, StatusOK, "", r)
		if err != nil {
			t.Fatal(err)
		}
		add(b)
	}
	ext.Properties = map[string]string{"": "v", "TAGS": "x"}
	list := appendMessageExtList(nil, []MessageExt{sampleExt, ext, {}})
	wide := []byte{0x84, // wide ints, nil, an unknown key, out of order
		0xa9, 'm', 'a', 'x', 'O', 'f', 'f', 's', 'e', 't', 0xd3, 0, 0, 0, 0, 0, 0, 0, 9,
		0xa1, 'x', 0x92, 0xc3, 0xc0,
		0xa9, 'm', 'i', 'n', 'O', 'f', 'f', 's', 'e', 't', 0xc0,
		0xaf, 'n', 'e', 'x', 't', 'B', 'e', 'g', 'i', 'n', 'O', 'f', 'f', 's', 'e', 't', 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}
	out = append(out,
		[2][]byte{fields(map[string]any{"maxOffset": uint64(7), "nextBeginOffset": int8(-1)}), list},
		[2][]byte{wide, nil},
		[2][]byte{{0x82, 0xa9, 'm', 'i', 'n', 'O', 'f', 'f', 's', 'e', 't', 0x05, 0xa9, 'm', 'i', 'n', 'O', 'f', 'f', 's', 'e', 't', 0xc0}, nil}, // nil over a value
		[2][]byte{{0xc0}, {0xc0}},
		[2][]byte{{0x80}, {0x90}},
		[2][]byte{{0x81, 0xa9, 'm', 'a', 'x', 'O', 'f', 'f', 's', 'e', 't', 0xcb, 0x40, 0x26, 0, 0, 0, 0, 0, 0}, nil}, // a float
		[2][]byte{nil, []byte{0x91, 0x81, 0xa5, 't', 'o', 'p', 'i', 'c', 0xa0}},                                       // no body
		[2][]byte{nil, list[:len(list)-3]},
	)
	return out
}

// pullFrame builds a pull answer's frame around raw fields and body.
func pullFrame(fields, body []byte) []byte {
	return AppendFrame(nil, &Frame{Code: CodePullMessage, Flags: FlagResponse, Fields: fields, Body: body})
}

// TestPullDecodeMatchesGeneric runs the seeds through both decoders, and
// every truncation and one-byte change of them.
func TestPullDecodeMatchesGeneric(t *testing.T) {
	for i, s := range pullSeeds(t) {
		for _, part := range []int{0, 1} {
			in := s[part]
			for cut := 0; cut <= len(in); cut++ {
				mut := [2][]byte{s[0], s[1]}
				mut[part] = in[:cut]
				checkPullFrame(t, fmt.Sprintf("seed %d part %d cut %d", i, part, cut), mut[0], mut[1])
			}
			for at := range in {
				for _, x := range []byte{0x00, 0x80, 0xa0, 0xc0, 0xcf, 0xff} {
					mut := [2][]byte{s[0], s[1]}
					mut[part] = bytes.Clone(in)
					mut[part][at] = x
					checkPullFrame(t, fmt.Sprintf("seed %d part %d byte %d = %#x", i, part, at, x), mut[0], mut[1])
				}
			}
		}
	}
}

func checkPullFrame(t *testing.T, name string, fields, body []byte) {
	t.Helper()
	f, err := DecodeFrame(pullFrame(fields, body), Limits{})
	if err != nil {
		return // not a frame at all: neither decoder sees it
	}
	if d := comparePullDecoders(f, Limits{}); d != "" {
		t.Fatalf("%s: fields %x body %x:\n%s", name, fields, body, d)
	}
}

func FuzzPullDecodeMatchesGeneric(f *testing.F) {
	for _, s := range pullSeeds(f) {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, fields, body []byte) {
		checkPullFrame(t, "input", fields, body)
	})
}

// TestPullMessagesAliasFrame: bodies and raw properties are sub-slices of
// the frame's body, not copies.
func TestPullMessagesAliasFrame(t *testing.T) {
	b, err := AppendResponse(nil, CodePullMessage, 1, StatusOK, "", &PullResponse{Messages: []MessageExt{sampleExt, sampleExt}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := DecodeFrame(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var pr PullResponse
	if err := DecodeResponse(f, Limits{}, &pr); err != nil {
		t.Fatal(err)
	}
	for i, m := range pr.Messages {
		if !sliceWithin(m.Body, f.Body) || !sliceWithin(m.RawProperties, f.Body) {
			t.Errorf("message %d: body or properties copied out of the frame", i)
		}
		if m.Tags() != "paid" || m.Property(PropertyKeys) != "k1 k2" {
			t.Errorf("message %d: tags %q keys %q", i, m.Tags(), m.Property(PropertyKeys))
		}
	}
	if pr.Messages[0].Topic != "orders" || !sameString(pr.Messages[0].Topic, pr.Messages[1].Topic) {
		t.Error("the topic is not one string per answer")
	}
}

// sliceWithin reports whether s lies inside buf's memory.
func sliceWithin(s, buf []byte) bool {
	if len(s) == 0 || len(buf) == 0 {
		return false
	}
	start := reflect.ValueOf(buf).Pointer()
	p := reflect.ValueOf(s).Pointer()
	return p >= start && p+uintptr(len(s)) <= start+uintptr(len(buf))
}

// sameString reports whether a and b are one string (same bytes in memory).
func sameString(a, b string) bool {
	return a == b && unsafe.StringData(a) == unsafe.StringData(b)
}
