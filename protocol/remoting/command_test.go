package remoting

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
)

func frameOf(serialize byte, header, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(serialize)<<24|uint32(len(header)))
	return append(append(b, header...), body...)
}

func TestDecodeRejects(t *testing.T) {
	lim := Limits{MaxFrameSize: 1 << 20, MaxHeaderSize: 1 << 10}
	bin := func(remarkLen int32, tail ...byte) []byte {
		h := make([]byte, 13)
		h = binary.BigEndian.AppendUint32(h, uint32(remarkLen))
		return append(h, tail...)
	}
	cases := []struct {
		name  string
		frame []byte
	}{
		{"length zero", []byte{0, 0, 0, 0}},
		{"length 3", []byte{0, 0, 0, 3, 0, 0, 0}},
		{"length above the limit", []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
		{"length 4 GiB", []byte{0xff, 0xff, 0xff, 0xff}},
		{"header above the limit", frameOf(0, make([]byte, 2000), nil)},
		{"header longer than the frame", append(binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, 100), 0, 0, 0, 0)},
		{"unknown serialize type", frameOf(2, []byte("{}"), nil)},
		{"bad JSON", frameOf(0, []byte(`{"code":10,`), nil)},
		{"JSON not an object", frameOf(0, []byte(`[1,2]`), nil)},
		{"JSON ext value not a string", frameOf(0, []byte(`{"code":10,"extFields":{"a":1}}`), nil)},
		{"JSON code out of range", frameOf(0, []byte(`{"code":99999999999}`), nil)},
		{"JSON trailing object", frameOf(0, []byte(`{"code":10} {"code":11}`), nil)},
		{"JSON language object", frameOf(0, []byte(`{"code":10,"language":{}}`), nil)},
		{"binary header too short", frameOf(1, make([]byte, 12), nil)},
		{"binary remark past the header", frameOf(1, bin(1000), nil)},
		{"binary remark negative", frameOf(1, bin(-1), nil)},
		{"binary ext length cut off", frameOf(1, bin(0, 0, 0), nil)},
		{"binary ext past the header", frameOf(1, bin(0, 0, 0, 0, 9, 0, 1, 'k'), nil)},
		{"binary ext key past the fields", frameOf(1, bin(0, 0, 0, 0, 3, 0, 9, 'k'), nil)},
		{"binary ext value cut off", frameOf(1, bin(0, 0, 0, 0, 5, 0, 1, 'k', 0, 0), nil)},
		{"binary ext value past the fields", frameOf(1, bin(0, 0, 0, 0, 7, 0, 1, 'k', 0x7f, 0, 0, 0), nil)},
		{"binary bytes after the ext fields", frameOf(1, bin(0, 0, 0, 0, 0, 1), nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Split(c.frame, lim); err != nil {
				if !errors.Is(err, ErrFrame) {
					t.Fatalf("Split: %v does not wrap ErrFrame", err)
				}
				return
			}
			_, err := Decode(c.frame, lim)
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("Decode = %v, want an ErrFrame error", err)
			}
		})
	}
}

func TestSplitPartial(t *testing.T) {
	f, err := Append(nil, &Command{Code: PullMessage, Opaque: 5, ExtFields: map[string]string{"topic": "t"}, Body: []byte("xyz")})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(f); i++ {
		if n, err := Split(f[:i], Limits{}); n != 0 || err != nil {
			t.Fatalf("Split of %d of %d bytes = %d, %v; want 0, nil", i, len(f), n, err)
		}
	}
	two := append(append([]byte(nil), f...), f...)
	if n, err := Split(two, Limits{}); n != len(f) || err != nil {
		t.Fatalf("Split of two frames = %d, %v; want %d", n, err, len(f))
	}
}

func TestRoundTrip(t *testing.T) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		c := Command{Code: SendMessage, Language: LangGo, Version: 317, Opaque: -7, Flag: FlagOneway, Remark: "r\x01é",
			ExtFields: map[string]string{"properties": "TAGS\x01a\x02", "": "empty key"}, Body: []byte{0, 1, 2}, Serialize: st}
		f, err := Append([]byte("prefix"), &c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(f[len("prefix"):], Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, c) {
			t.Fatalf("serialize %d: got %+v, want %+v", st, *got, c)
		}
	}
}

func TestLanguageSpellings(t *testing.T) {
	for header, want := range map[string]byte{
		`{"language":"GO"}`: LangGo, `{"language":"JAVA"}`: LangJava, `{"language":9}`: LangGo,
		`{"language":null}`: LangJava, `{}`: LangJava, `{"language":"COBOL"}`: LangOther,
	} {
		c, err := Decode(frameOf(0, []byte(header), nil), Limits{})
		if err != nil || c.Language != want {
			t.Errorf("%s: language %d, %v; want %d", header, c.Language, err, want)
		}
	}
}

// FuzzDecode: no input panics or allocates beyond its size; what decodes
// re-encodes to a frame that decodes to the same command.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.hex"))
	for _, p := range files {
		f.Add(readHex(f, p))
	}
	f.Add(frameOf(1, make([]byte, 21), nil))
	f.Add(frameOf(0, []byte(`{"code":1,"extFields":{"a":"b"}}`), []byte("body")))
	f.Fuzz(func(t *testing.T, b []byte) {
		lim := Limits{MaxFrameSize: 1 << 16, MaxHeaderSize: 1 << 12}
		n, err := Split(b, lim)
		if err != nil || n == 0 {
			return
		}
		c, err := Decode(b[:n], lim)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			return
		}
		again, err := Append(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Decode(again, Limits{})
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if c2.Code != c.Code || c2.Opaque != c.Opaque || c2.Flag != c.Flag || c2.Remark != c.Remark ||
			string(c2.Body) != string(c.Body) || !reflect.DeepEqual(c2.ExtFields, c.ExtFields) {
			t.Fatalf("round trip changed %+v into %+v", c, c2)
		}
	})
}

// TestSplitAllocations: Split allocates nothing for a frame still
// arriving, whatever it declares, and only its error's text for a hostile
// length, refused from the length words.
func TestSplitAllocations(t *testing.T) {
	partial := []byte{0x00, 0xf0, 0x00, 0x00, 0, 0, 0, 2, '{', '}'} // 15 MiB declared, 10 bytes here
	if n, err := Split(partial, Limits{}); n != 0 || err != nil {
		t.Fatalf("Split of a partial frame = %d, %v", n, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Split(partial, Limits{}) }); n != 0 {
		t.Errorf("Split of a partial frame allocates %.0f times", n)
	}
	for _, b := range [][]byte{{0xff, 0xff, 0xff, 0xff}, {0x00, 0xff, 0xff, 0x00, 0, 0xff, 0xff, 0xff}} {
		if n := testing.AllocsPerRun(100, func() { _, _ = Split(b, Limits{}) }); n > 6 {
			t.Errorf("Split(%x) allocates %.0f times", b, n)
		}
	}
}

// FuzzJSONHeader and FuzzBinaryHeader aim at one header decoder each: no
// input panics, and what decodes re-encodes to the same fields.
func FuzzJSONHeader(f *testing.F) {
	for _, g := range goldens {
		if g.header != "" {
			f.Add([]byte(g.header))
		}
	}
	f.Add([]byte(`{"code":1,"language":9,"remark":null,"extFields":null}`))
	f.Fuzz(func(t *testing.T, b []byte) { headerRoundTrip(t, SerializeJSON, b) })
}

func FuzzBinaryHeader(f *testing.F) {
	seed, _ := Append(nil, &Command{Code: QueryConsumerOffset, Remark: "r", ExtFields: map[string]string{"topic": "t", "queueId": "1"},
		Serialize: SerializeRocketMQ})
	f.Add(seed[8:])
	f.Add(make([]byte, binaryFixed))
	f.Fuzz(func(t *testing.T, b []byte) { headerRoundTrip(t, SerializeRocketMQ, b) })
}

func headerRoundTrip(t *testing.T, st byte, header []byte) {
	var c *Command
	var err error
	if st == SerializeJSON {
		c, err = decodeJSONHeader(header)
	} else {
		c, err = decodeBinaryHeader(header)
	}
	if err != nil {
		if !errors.Is(err, ErrFrame) {
			t.Fatalf("error %v does not wrap ErrFrame", err)
		}
		return
	}
	c.Serialize = st
	f, err := Append(nil, c)
	if err != nil {
		return // a key or code beyond what the binary header holds
	}
	c2, err := Decode(f, Limits{MaxHeaderSize: 1<<24 - 1})
	if err != nil {
		t.Fatalf("re-encoded header does not decode: %v", err)
	}
	if c2.Opaque != c.Opaque || c2.Flag != c.Flag || c2.Remark != c.Remark || !reflect.DeepEqual(c2.ExtFields, c.ExtFields) ||
		(st == SerializeJSON && c2.Code != c.Code) {
		t.Fatalf("round trip changed %+v into %+v", c, c2)
	}
}
