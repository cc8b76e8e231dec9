package writer

import (
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

func TestAppendStoreProperties(t *testing.T) {
	// raw encodes pairs in the order given, as a client might.
	raw := func(kv ...string) []byte {
		b := []byte{0x80 | byte(len(kv)/2)}
		for _, s := range kv {
			b = append(b, 0xa0|byte(len(s)))
			b = append(b, s...)
		}
		return b
	}
	tests := []struct {
		name    string
		raw     []byte
		want    string // the log's encoding, when ok
		ok      bool
		wantErr bool
	}{
		{"none", nil, "", true, false},
		{"sorted", raw("KEYS", "k1 k2", "TAGS", "t", "UNIQ_KEY", "id"), "KEYS\x01k1 k2\x02TAGS\x01t\x02UNIQ_KEY\x01id\x02", true, false},
		{"unsorted takes the map", raw("TAGS", "t", "KEYS", "k"), "", false, false},
		{"repeated key takes the map", raw("A", "1", "A", "2"), "", false, false},
		{"delay takes the map", raw("DELAY", "3", "TAGS", "t"), "", false, false},
		{"absolute delay takes the map", raw("A", "1", "TIMER_DELIVER_MS", "9"), "", false, false},
		{"separator in a value", raw("A", "x\x01y"), "", true, true},
		{"separator in a key", raw("A\x02", "v"), "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("before")
			out, ok, err := appendStoreProperties(prefix, tt.raw)
			if (err != nil) != tt.wantErr || ok != tt.ok {
				t.Fatalf("ok %v err %v, want ok %v err %v", ok, err, tt.ok, tt.wantErr)
			}
			if err == nil && ok {
				if got := string(out[len(prefix):]); got != tt.want {
					t.Fatalf("encoded %q, want %q", got, tt.want)
				}
				// The same bytes the map path writes.
				m := protocol.Message{RawProperties: tt.raw}
				slow, err := EncodeProperties(m.PropertyMap())
				if err != nil || string(slow) != tt.want {
					t.Fatalf("map path gives %q (%v)", slow, err)
				}
			} else if string(out) != "before" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}
