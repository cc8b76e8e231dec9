package netio

import (
	"bytes"
	"maps"
	"net/netip"
	"testing"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// The pull answer's builder puts each stored record on the wire as the
// message it stores: every field, the properties without a Go map (the
// same bytes as the map's canonical form when they are stored in key
// order, as the broker stores them), and the host strings it caches from
// record to record follow the records.
func TestExtBuilder(t *testing.T) {
	mk := func(born string, kv ...string) *storage.Record {
		props, err := storage.EncodeProperties(kv...)
		if err != nil {
			t.Fatal(err)
		}
		return &storage.Record{
			Topic: []byte("orders"), QueueID: 3, QueueOffset: 42, PhysicalOffset: 4096, TotalSize: 300,
			Flag: 7, Body: []byte("hello"), Properties: props, BornTimestamp: 1, StoreTimestamp: 2,
			BornHost:  netip.MustParseAddrPort(born),
			StoreHost: netip.MustParseAddrPort("10.0.0.2:10911"), ReconsumeTimes: 1, SysFlag: 4, BodyCRC: 99,
		}
	}
	var xb ExtBuilder // one builder for all cases, as for the records of one answer
	for _, tc := range []struct {
		name   string
		rec    *storage.Record
		props  map[string]string
		sorted bool // stored in key order: the same bytes as the map's form
	}{
		{"no properties", mk("10.0.0.1:5000"), nil, true},
		{"sorted", mk("10.0.0.1:5000", "KEYS", "k1 k2", "TAGS", "a", "UNIQ_KEY", "0A00"), map[string]string{"KEYS": "k1 k2", "TAGS": "a", "UNIQ_KEY": "0A00"}, true},
		{"another producer", mk("10.0.0.9:6000", "TAGS", "b"), map[string]string{"TAGS": "b"}, true},
		{"unsorted", mk("10.0.0.9:6000", "UNIQ_KEY", "u", "TAGS", "b", "KEYS", "k"), map[string]string{"UNIQ_KEY": "u", "TAGS": "b", "KEYS": "k"}, false},
		{"long value", mk("10.0.0.1:5000", "K", string(bytes.Repeat([]byte("v"), 300))), map[string]string{"K": string(bytes.Repeat([]byte("v"), 300))}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rec
			got := xb.Ext(r)
			want := protocol.MessageExt{
				Message: protocol.Message{Topic: "orders", Flag: 7, Body: []byte("hello"), Properties: tc.props},
				QueueID: 3, QueueOffset: 42, CommitLogOffset: 4096, StoreSize: 300, BornTimestamp: 1, StoreTimestamp: 2,
				BornHost: r.BornHost.String(), StoreHost: "10.0.0.2:10911", MsgID: protocol.OffsetMsgID(r.StoreHost, 4096),
				ReconsumeTimes: 1, SysFlag: 4, BodyCRC: 99,
			}
			if got.Properties != nil {
				t.Fatal("the builder made a Go map")
			}
			gb, wb := got.AppendMsgpack(nil), want.AppendMsgpack(nil)
			if tc.sorted && !bytes.Equal(gb, wb) {
				t.Fatalf("wire bytes differ:\n got %x\nwant %x", gb, wb)
			}
			if !maps.Equal(got.PropertyMap(), tc.props) {
				t.Fatalf("properties %v, want %v", got.PropertyMap(), tc.props)
			}
			got.Properties, got.RawProperties, want.Properties = nil, nil, nil
			if gb, wb := got.AppendMsgpack(nil), want.AppendMsgpack(nil); !bytes.Equal(gb, wb) {
				t.Fatalf("fields differ:\n got %x\nwant %x", gb, wb)
			}
		})
	}
}
