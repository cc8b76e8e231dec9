package actors

import (
	"bytes"
	"maps"
	"net/netip"
	"testing"

	"github.com/wharfmq/wharf/storage"
)

// The pull answer's builder must put the same message on the wire as
// recordToExt (a map per message): the same bytes when the stored
// properties are in key order (how the broker stores them), the same
// properties once decoded otherwise.
func TestExtBuilderMatchesRecordToExt(t *testing.T) {
	mk := func(kv ...string) *storage.Record {
		props, err := storage.EncodeProperties(kv...)
		if err != nil {
			t.Fatal(err)
		}
		return &storage.Record{
			Topic: []byte("orders"), QueueID: 3, QueueOffset: 42, PhysicalOffset: 4096, TotalSize: 300,
			Flag: 7, Body: []byte("hello"), Properties: props, BornTimestamp: 1, StoreTimestamp: 2,
			BornHost:  netip.MustParseAddrPort("10.0.0.1:5000"),
			StoreHost: netip.MustParseAddrPort("10.0.0.2:10911"), ReconsumeTimes: 1, SysFlag: 0, BodyCRC: 99,
		}
	}
	var xb extBuilder
	for _, tc := range []struct {
		name   string
		rec    *storage.Record
		sameKV bool // stored in key order: identical bytes
	}{
		{"no properties", mk(), true},
		{"sorted", mk("KEYS", "k1 k2", "TAGS", "a", "UNIQ_KEY", "0A0000010000"), true},
		{"unsorted", mk("UNIQ_KEY", "u", "TAGS", "b", "KEYS", "k"), false},
		{"long value", mk("K", string(bytes.Repeat([]byte("v"), 300))), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := recordToExt(tc.rec)
			got := xb.ext(tc.rec)
			if !maps.Equal(got.PropertyMap(), want.PropertyMap()) {
				t.Fatalf("properties %v, want %v", got.PropertyMap(), want.PropertyMap())
			}
			got.RawProperties = nil
			got.Properties = nil
			w := want
			w.Properties = nil
			wb, gb := w.AppendMsgpack(nil), got.AppendMsgpack(nil)
			if !bytes.Equal(wb, gb) {
				t.Fatalf("fields other than the properties differ:\n got %x\nwant %x", gb, wb)
			}
			if tc.sameKV {
				g2 := xb.ext(tc.rec)
				if a, b := g2.AppendMsgpack(nil), want.AppendMsgpack(nil); !bytes.Equal(a, b) {
					t.Fatalf("wire bytes differ:\n got %x\nwant %x", a, b)
				}
			}
		})
	}
}
