package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files and seed corpora")

// goldenFrames are the example frames of docs/PROTOCOL.md.
func goldenFrames(t testing.TB) map[string][]byte {
	store := netip.MustParseAddrPort("127.0.0.1:10911")
	msgID := OffsetMsgID(store, 0)
	must := func(b []byte, err error) []byte {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	body := []byte("hi")
	return map[string][]byte{
		"send_request": must(AppendRequest(nil, 1, 0, &SendRequest{
			ProducerGroup: "pg", Topic: "demo", QueueID: 0, BornTimestamp: 1700000000000,
			Properties: map[string]string{PropertyTags: "a"}, Body: body,
		})),
		"send_response": must(AppendResponse(nil, CodeSendMessage, 1, StatusOK, "", &SendResponse{
			MsgID: msgID, QueueID: 0, QueueOffset: 0,
		})),
		"pull_request": must(AppendRequest(nil, 2, 0, &PullRequest{
			ConsumerGroup: "cg", Topic: "demo", QueueID: 0, QueueOffset: 0, MaxMsgNums: 32,
			Subscription: "a", SuspendTimeoutMillis: 15000,
		})),
		"pull_response": must(AppendResponse(nil, CodePullMessage, 2, StatusOK, "", &PullResponse{
			NextBeginOffset: 1, MinOffset: 0, MaxOffset: 1, SuggestWhichBrokerID: 0,
			Messages: []MessageExt{{
				Message:         Message{Topic: "demo", Body: body, Properties: map[string]string{PropertyTags: "a"}},
				QueueID:         0,
				QueueOffset:     0,
				CommitLogOffset: 0,
				StoreSize:       124, // 111 + len("hi") + len("demo") + len("TAGS\x01a\x02"): see TestPullExampleRecord
				BornTimestamp:   1700000000000,
				StoreTimestamp:  1700000000005,
				BornHost:        "127.0.0.1:50000",
				StoreHost:       store.String(),
				MsgID:           msgID,
				BodyCRC:         crc32.ChecksumIEEE(body) & 0x7FFFFFFF,
			}},
		})),
		"route_response": must(AppendResponse(nil, CodeGetRouteInfoByTopic, 3, StatusOK, "", &RouteData{
			Topic: "demo", Version: 1700000000000000,
			QueueDatas: []QueueData{{BrokerName: "a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRead | PermWrite}},
			Brokers: []BrokerRef{{ClusterName: "c", BrokerName: "a", BrokerID: 0, BrokerAddr: "127.0.0.1:10911",
				BrokerRole: "ASYNC_MASTER", Alive: true}},
		})),
	}
}

func readHexFile(t testing.TB, path string) []byte {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func writeHexFile(t testing.TB, path string, b []byte) {
	var sb strings.Builder
	for i := 0; i < len(b); i += 16 {
		sb.WriteString(hex.EncodeToString(b[i:min(i+16, len(b))]))
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGoldenFrames(t *testing.T) {
	for name, b := range goldenFrames(t) {
		path := filepath.Join("testdata", name+".hex")
		if *update {
			writeHexFile(t, path, b)
			if err := os.WriteFile(filepath.Join("testdata", name+".annotated"), []byte(annotateFrame(b)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := readHexFile(t, path)
		if !bytes.Equal(b, want) {
			t.Errorf("%s: encoding changed:\n got %x\nwant %x", name, b, want)
		}
		// And the golden bytes decode back to the same frame.
		f, err := DecodeFrame(want, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.IsResponse() {
			err = DecodeResponse(f, Limits{}, NewResponse(f.Code))
		} else {
			_, err = DecodeRequest(f, Limits{})
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestProtocolDocExamples checks that every annotated example in
// docs/PROTOCOL.md spells exactly the golden bytes. A block starts after a
// line "<!-- golden:NAME -->"; its hex is what precedes "|" on each line.
func TestProtocolDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "PROTOCOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- golden:([a-z_]+) -->\\s*```[a-z]*\\n(.*?)```")
	found := map[string]bool{}
	for _, m := range re.FindAllSubmatch(doc, -1) {
		name := string(m[1])
		found[name] = true
		var hexs []string
		for _, line := range strings.Split(string(m[2]), "\n") {
			if i := strings.Index(line, "|"); i >= 0 {
				line = line[:i]
			}
			hexs = append(hexs, strings.Fields(line)...)
		}
		got, err := hex.DecodeString(strings.Join(hexs, ""))
		if err != nil {
			t.Errorf("doc example %s: %v", name, err)
			continue
		}
		want := readHexFile(t, filepath.Join("testdata", name+".hex"))
		if !bytes.Equal(got, want) {
			t.Errorf("doc example %s differs from testdata/%s.hex:\n doc %x\nwant %x", name, name, got, want)
		}
	}
	for _, name := range []string{"send_request", "send_response", "pull_request", "pull_response"} {
		if !found[name] {
			t.Errorf("docs/PROTOCOL.md lacks the annotated example %s", name)
		}
	}
}

// ---- annotator: renders a frame byte by byte for the documentation ----

type annotator struct {
	b     []byte
	p     int
	lines []string
}

func (a *annotator) emit(n int, indent int, format string, args ...any) {
	chunk := a.b[a.p : a.p+n]
	a.p += n
	comment := strings.Repeat("  ", indent) + fmt.Sprintf(format, args...)
	for i := 0; i < len(chunk) || i == 0; i += 8 {
		h := hex.EncodeToString(chunk[i:min(i+8, len(chunk))])
		var sp []string
		for j := 0; j < len(h); j += 2 {
			sp = append(sp, h[j:j+2])
		}
		c := comment
		if i > 0 {
			c = strings.Repeat("  ", indent) + "  ..."
		}
		a.lines = append(a.lines, fmt.Sprintf("%-24s| %s", strings.Join(sp, " "), c))
	}
}

func annotateFrame(b []byte) string {
	a := &annotator{b: b}
	length := binary.BigEndian.Uint32(b)
	hl := int(binary.BigEndian.Uint32(b[4:]))
	a.emit(4, 0, "length = %d: the bytes after this word", length)
	a.emit(4, 0, "headerLength = %d", hl)
	a.value(0, "")
	if a.p < len(b) {
		if bytes.Equal(b[a.p:], []byte("hi")) {
			a.emit(len(b)-a.p, 0, "body: the message payload, raw bytes %q", b[a.p:])
		} else {
			a.lines = append(a.lines, fmt.Sprintf("%-24s| %s", "", "body: msgpack array of MessageExt maps"))
			a.value(0, "")
		}
	}
	return strings.Join(a.lines, "\n") + "\n"
}

// value annotates one msgpack value; key is the map key it belongs to.
func (a *annotator) value(indent int, key string) {
	c := a.b[a.p]
	r := &reader{b: a.b, p: a.p}
	switch {
	case c >= 0x80 && c <= 0x8f || c == 0xde || c == 0xdf:
		n, _ := r.mapLen()
		a.emit(r.p-a.p, indent, "%s: map of %d pairs", fmtName(c), n)
		for range n {
			kr := &reader{b: a.b, p: a.p}
			k, _ := kr.str()
			a.emit(kr.p-a.p, indent+1, "key %s %q", fmtName(a.b[kr.p-len(k)-1]), k)
			a.value(indent+2, k)
		}
	case c >= 0x90 && c <= 0x9f || c == 0xdc || c == 0xdd:
		n, _ := r.arrayLen()
		a.emit(r.p-a.p, indent, "%s: array of %d", fmtName(c), n)
		for range n {
			a.value(indent+1, "")
		}
	case c >= 0xa0 && c <= 0xbf || c == 0xd9 || c == 0xda || c == 0xdb:
		s, _ := r.str()
		a.emit(r.p-a.p, indent, "%s %q", fmtName(c), s)
	case c == 0xc4 || c == 0xc5 || c == 0xc6:
		s, _ := r.rawStr()
		a.emit(r.p-a.p, indent, "%s, %d bytes: %q", fmtName(c), len(s), s)
	case c == 0xc2 || c == 0xc3:
		a.emit(1, indent, "%s", fmtName(c))
	default:
		v, err := r.int64()
		if err != nil {
			panic(err)
		}
		desc := fmt.Sprintf("%s %d", fmtName(c), v)
		switch key {
		case keyCode:
			desc += " (" + Code(v).String() + ")"
		case keyStatus:
			desc += " (" + Status(v).String() + ")"
		case keyFlags:
			switch Flags(v) {
			case 0:
				desc += " (request)"
			case FlagResponse:
				desc += " (response)"
			}
		}
		a.emit(r.p-a.p, indent, "%s", desc)
	}
}

// fmtName names the msgpack format of a first byte.
func fmtName(c byte) string {
	switch {
	case c <= 0x7f:
		return "positive fixint"
	case c <= 0x8f:
		return "fixmap"
	case c <= 0x9f:
		return "fixarray"
	case c <= 0xbf:
		return "fixstr"
	case c >= 0xe0:
		return "negative fixint"
	}
	return map[byte]string{0xc0: "nil", 0xc2: "false", 0xc3: "true", 0xc4: "bin8", 0xc5: "bin16", 0xc6: "bin32",
		0xcc: "uint8", 0xcd: "uint16", 0xce: "uint32", 0xcf: "uint64", 0xd0: "int8", 0xd1: "int16", 0xd2: "int32", 0xd3: "int64",
		0xd9: "str8", 0xda: "str16", 0xdb: "str32", 0xdc: "array16", 0xdd: "array32", 0xde: "map16", 0xdf: "map32"}[c]
}

// readHexdump reads a "hexdump -C" file: the hex columns between the offset
// and the "|...|" text.
func readHexdump(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range strings.Split(string(raw), "\n") {
		cols, _, _ := strings.Cut(line, "|")
		fs := strings.Fields(cols)
		if len(fs) < 2 {
			continue
		}
		b, err := hex.DecodeString(strings.Join(fs[1:], ""))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, b...)
	}
	return out
}

// storeSize is a message's CommitLog record size with IPv4 hosts, as
// PROTOCOL.md 6.2 tells a client to compute it.
func storeSize(m *Message) int {
	n := recordOverhead + len(m.Body) + len(m.Topic)
	for k, v := range m.PropertyMap() {
		n += len(k) + 1 + len(v) + 1
	}
	return n
}

// TestPullExampleRecord: the example of PROTOCOL.md 14.4 holds what 6.2
// says. Its storeSize is the size of the record its message makes, computed
// as 6.2 tells a client to (and that computation is checked against
// storage's golden record, whose layout STORAGE.md gives: protocol cannot
// import storage); its MessageExt has 16 keys, and one without properties 15.
func TestPullExampleRecord(t *testing.T) {
	// storage/testdata/record_v1.hex: TOTALSIZE at 0, the body length at 84,
	// then the body, the topic behind a byte, the properties behind two.
	rec := readHexdump(t, filepath.Join("..", "storage", "testdata", "record_v1.hex"))
	total := int(binary.BigEndian.Uint32(rec))
	p := 84
	bodyLen := int(binary.BigEndian.Uint32(rec[p:]))
	p += 4 + bodyLen
	topicLen := int(rec[p])
	p += 1 + topicLen
	propsLen := int(binary.BigEndian.Uint16(rec[p:])) // with the CRC property
	if total != len(rec) || p+2+propsLen != total || !strings.HasPrefix(string(rec[total-recordCRCPropertySize:]), "__CRC32#\x01") {
		t.Fatalf("storage's golden record does not have the layout of STORAGE.md: total %d of %d bytes, properties end at %d", total, len(rec), p+2+propsLen)
	}
	if want := recordOverhead + bodyLen + topicLen + propsLen - recordCRCPropertySize; total != want {
		t.Fatalf("golden record of %d bytes; 6.2's formula gives %d", total, want)
	}

	f, err := DecodeFrame(goldenFrames(t)["pull_response"], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var pr PullResponse
	if err := DecodeResponse(f, Limits{}, &pr); err != nil {
		t.Fatal(err)
	}
	m := pr.Messages[0]
	if got, want := int(m.StoreSize), storeSize(&m.Message); got != want || want != 124 {
		t.Errorf("14.4 storeSize %d; the record of its message is %d bytes (doc: 124)", got, want)
	}
	keys := func(b []byte) int {
		r := &reader{b: b}
		n, err := r.mapLen()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := keys(f.Body[1:]); n != 16 || f.Body[1] != 0xde {
		t.Errorf("14.4 MessageExt: %d keys, header 0x%02x; doc: 16 in a map16", n, f.Body[1])
	}
	m.Properties, m.RawProperties = nil, nil
	if b := m.AppendMsgpack(nil); keys(b) != 15 || b[0] != 0x8f {
		t.Errorf("MessageExt without properties: %d keys, header 0x%02x; doc: 15 in a fixmap", keys(b), b[0])
	}
}
