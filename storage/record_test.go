package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"hash/crc32"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestRecordGolden builds a record field by field from RocketMQ's layout and
// checks that the CommitLog wrote exactly those bytes.
func TestRecordGolden(t *testing.T) {
	body := []byte("hello, wharf")
	props := []byte("KEYS\x01order-1\x02TAGS\x01tagA\x02")
	m := &Message{Topic: "TopicTest", QueueID: 3, Flag: 7, Body: body, Properties: props,
		BornTimestamp: 1700000000000, BornHost: netip.MustParseAddrPort("10.0.0.1:5000"), ReconsumeTimes: 2}
	const storeTs = 1700000000123

	be := binary.BigEndian
	var w []byte
	total := 91 + len(body) + len("TopicTest") + len(props) + 20
	w = be.AppendUint32(w, uint32(total))            // TOTALSIZE
	w = be.AppendUint32(w, 0xDAA320A7)               // MAGICCODE V1
	w = be.AppendUint32(w, crcIEEE(body)&0x7FFFFFFF) // BODYCRC
	w = be.AppendUint32(w, 3)                        // QUEUEID
	w = be.AppendUint32(w, 7)                        // FLAG
	w = be.AppendUint64(w, 0)                        // QUEUEOFFSET
	w = be.AppendUint64(w, 0)                        // PHYSICALOFFSET
	w = be.AppendUint32(w, 0)                        // SYSFLAG
	w = be.AppendUint64(w, 1700000000000)            // BORNTIMESTAMP
	w = append(w, 10, 0, 0, 1)                       // BORNHOST ip
	w = be.AppendUint32(w, 5000)                     // BORNHOST port
	w = be.AppendUint64(w, storeTs)                  // STORETIMESTAMP
	w = append(w, 127, 0, 0, 1)                      // STOREHOST ip
	w = be.AppendUint32(w, 10911)                    // STOREHOST port
	w = be.AppendUint32(w, 2)                        // RECONSUMETIMES
	w = be.AppendUint64(w, 0)                        // PREPARED TXN OFFSET
	w = be.AppendUint32(w, uint32(len(body)))        // BODYLENGTH
	w = append(w, body...)                           // BODY
	w = append(w, byte(len("TopicTest")))            // TOPICLENGTH
	w = append(w, "TopicTest"...)                    // TOPIC
	w = be.AppendUint16(w, uint16(len(props)+20))    // PROPERTIESLENGTH (user properties + record CRC property)
	w = append(w, props...)                          // PROPERTIES
	crc := crc32.ChecksumIEEE(w)                     // record CRC: every byte before the property
	w = append(w, "__CRC32#\x01"...)
	for range 10 {
		w = append(w, byte('0'+crc%10)) // ten digits, least significant first
		crc /= 10
	}
	w = append(w, 0x02)
	if len(w) != total {
		t.Fatalf("hand-built record is %d bytes, want %d", len(w), total)
	}

	mem := vfs.NewMem()
	s, _ := mustOpen(t, mem, testConfig("/store"))
	defer s.Close()
	res, err := s.AppendBatch([]*Message{m}, storeTs, nil)
	if err != nil || res[0].Err != nil {
		t.Fatalf("append: %v %v", err, res)
	}
	got, err := s.CommitLog().Read(res[0].PhyOffset, int(res[0].Size))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, w) {
		t.Fatalf("record bytes differ\n got %x\nwant %x", got, w)
	}
	golden := "testdata/record_v1.hex"
	if *update {
		os.WriteFile(golden, []byte(hex.Dump(got)), 0o644)
	}
	g, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("golden file: %v (run with -update)", err)
	}
	if string(g) != hex.Dump(got) {
		t.Fatalf("record differs from %s:\n%s", golden, hex.Dump(got))
	}
	r, err := DecodeRecord(got, true)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Topic) != "TopicTest" || !bytes.Equal(r.Body, body) || r.BornHost != m.BornHost || r.StoreTimestamp != storeTs || r.ReconsumeTimes != 2 {
		t.Fatalf("decoded %+v", r)
	}
	if v, ok := Property(r.Properties, "TAGS"); !ok || v != "tagA" {
		t.Fatalf("TAGS = %q %v", v, ok)
	}
}

func TestRecordIPv6Hosts(t *testing.T) {
	m := &Message{Topic: "T", Body: []byte("x"), BornHost: netip.MustParseAddrPort("[2001:db8::1]:7")}
	store := netip.MustParseAddrPort("[::1]:10911")
	n, err := RecordSize(m, store)
	if err != nil || n != 91+24+1+1+20 {
		t.Fatalf("size %d %v", n, err)
	}
	b := make([]byte, n)
	EncodeRecord(b, m, 5, 100, 9, store)
	r, err := DecodeRecord(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.BornHost != m.BornHost || r.StoreHost != store || r.SysFlag&(SysFlagBornHostV6|SysFlagStoreHostV6) != SysFlagBornHostV6|SysFlagStoreHostV6 {
		t.Fatalf("hosts %v %v flags %b", r.BornHost, r.StoreHost, r.SysFlag)
	}
}

func TestDecodeRecordErrors(t *testing.T) {
	m := &Message{Topic: "T", Body: []byte("body")}
	n, _ := RecordSize(m, netip.AddrPort{})
	good := make([]byte, n)
	EncodeRecord(good, m, 0, 0, 0, netip.AddrPort{})
	mut := func(f func(b []byte)) []byte { b := bytes.Clone(good); f(b); return b }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", good[:5], ErrShortRecord},
		{"torn", good[:n-1], ErrShortRecord},
		{"zeros", make([]byte, 200), ErrBadMagic},
		{"blank", mut(func(b []byte) { binary.BigEndian.PutUint32(b[4:], MagicBlank) }), ErrBadMagic},
		{"crc", mut(func(b []byte) { b[84+4] ^= 1 }), ErrBadCRC},
		{"body length", mut(func(b []byte) { binary.BigEndian.PutUint32(b[84:], 1<<30) }), ErrBadLength},
		{"size too small", mut(func(b []byte) { binary.BigEndian.PutUint32(b[0:], 10) }), ErrBadLength},
		{"props length", mut(func(b []byte) { binary.BigEndian.PutUint16(b[n-22:], 9) }), ErrBadLength},
		{"record crc", mut(func(b []byte) { b[20] ^= 1 }), ErrBadCRC},
		{"tail zeroed", mut(func(b []byte) { clear(b[n-5:]) }), ErrBadCRC},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord(tc.b, true)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMessageIllegal(t *testing.T) {
	tests := []struct {
		name string
		m    Message
	}{
		{"empty topic", Message{}},
		{"long topic", Message{Topic: strings.Repeat("t", 128)}},
		{"path topic", Message{Topic: "../etc"}},
		{"negative queue", Message{Topic: "T", QueueID: -1}},
		{"huge properties", Message{Topic: "T", Properties: make([]byte, 40000)}},
	}
	for _, tc := range tests {
		if _, err := RecordSize(&tc.m, netip.AddrPort{}); !errors.Is(err, ErrIllegal) {
			t.Errorf("%s: err %v, want ErrIllegal", tc.name, err)
		}
	}
}

func TestTagsHashCode(t *testing.T) {
	for s, want := range map[string]int64{"": 0, "a": 97, "TagA": 2598919, "hello": 99162322, "😀": 1772899, "TopicTest#KEY1": -1656969516, "polygenelubricants": -2147483648} {
		if got := TagsHashCode(s); got != want {
			t.Errorf("TagsHashCode(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestProperties(t *testing.T) {
	p, err := EncodeProperties("A", "1", "KEYS", "x y", "B", "")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"A": "1", "KEYS": "x y", "B": ""} {
		if v, ok := Property(p, k); !ok || v != want {
			t.Errorf("%s = %q %v", k, v, ok)
		}
	}
	if _, ok := Property(p, "C"); ok {
		t.Error("C found")
	}
	if _, err := EncodeProperties("A\x01", "x"); !errors.Is(err, ErrIllegal) {
		t.Errorf("separator accepted: %v", err)
	}
}

// FuzzDecodeRecord: arbitrary bytes never panic the decoder, never make it
// read outside its input, and whatever decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	m := &Message{Topic: "T", Body: []byte("seed"), Properties: []byte("KEYS\x01k\x02")}
	n, _ := RecordSize(m, netip.AddrPort{})
	b := make([]byte, n)
	EncodeRecord(b, m, 1, 2, 3, netip.AddrPort{})
	f.Add(b)
	f.Add(b[:n/2])
	f.Add([]byte{0, 0, 0, 8, 0xCB, 0xD4, 0x31, 0x94})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xDA, 0xA3, 0x20, 0xA7})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRecord(data, true)
		if err != nil {
			return
		}
		if int(r.TotalSize) > len(data) {
			t.Fatalf("decoded size %d beyond %d input bytes", r.TotalSize, len(data))
		}
		EachProperty(r.Properties, func(k, v []byte) {})
		_, _ = Property(r.Properties, PropKeys)
	})
}

func crcIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

// TestCheckMessageTopics: the CommitLog remembers the last topic that
// passed its check, and a different one is checked again, whatever came
// before it.
func TestCheckMessageTopics(t *testing.T) {
	s, _ := mustOpen(t, vfs.NewMem(), testConfig("/s"))
	defer s.Close()
	cl := s.CommitLog()
	for i, tc := range []struct {
		topic string
		ok    bool
	}{
		{"a", true}, {"a/b", false}, {"a", true}, {"a", true}, {"", false},
		{"a.b", false}, {"b-1", true}, {"b-1/", false}, {strings.Repeat("x", MaxTopicLen+1), false},
	} {
		err := cl.CheckMessage(&Message{Topic: tc.topic, Body: []byte("x")})
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrIllegal) {
			t.Errorf("%d: CheckMessage(topic %q) = %v, want ok %v", i, tc.topic, err, tc.ok)
		}
		out, err := s.AppendBatch([]*Message{{Topic: tc.topic, Body: []byte("x")}}, 1, nil)
		if stored := err == nil && len(out) == 1 && out[0].Err == nil; stored != tc.ok {
			t.Errorf("%d: AppendBatch(topic %q) stored %v (%v, %+v), want %v", i, tc.topic, stored, err, out, tc.ok)
		}
	}
}
