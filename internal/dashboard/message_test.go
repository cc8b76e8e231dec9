package dashboard

import (
	"strings"
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

// TestMessagePreview: printable UTF-8 bodies are text, anything else hex,
// and a long body is cut at previewBytes (a rune cut there stays text).
func TestMessagePreview(t *testing.T) {
	long := strings.Repeat("a", previewBytes-1) + "é"
	tests := []struct {
		name      string
		body      []byte
		text      string
		hex       string
		truncated bool
	}{
		{"text", []byte("hello <b>world</b>\n"), "hello <b>world</b>\n", "", false},
		{"empty", nil, "", "", false},
		{"binary", []byte{0, 1, 0xff}, "", "0001ff", false},
		{"invalid utf-8", []byte("a\xc3"), "", "61c3", false},
		{"cut inside a rune", []byte(long), long[:previewBytes], "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := protocol.MessageExt{Message: protocol.Message{Topic: "t", Body: tt.body, Properties: map[string]string{"KEYS": "k1"}}}
			got := toMessageJSON(m)
			if tt.hex != "" {
				if got.BodyText != nil || got.BodyHex != tt.hex {
					t.Errorf("got text %v hex %q, want hex %q", got.BodyText, got.BodyHex, tt.hex)
				}
			} else if got.BodyText == nil || *got.BodyText != tt.text {
				t.Errorf("got text %v hex %q, want text %q", got.BodyText, got.BodyHex, tt.text)
			}
			if got.Truncated != tt.truncated || got.BodySize != len(tt.body) || got.Properties["KEYS"] != "k1" {
				t.Errorf("got %+v", got)
			}
		})
	}
}

// TestBrokerRow: health is up with a sample, down with a failed one and
// unknown before the first.
func TestBrokerRow(t *testing.T) {
	ref := protocol.BrokerInfo{BrokerRef: protocol.BrokerRef{BrokerName: "g", BrokerAddr: "a:1", BrokerRole: "SLAVE", Alive: true}}
	tests := []struct {
		name   string
		bs     brokerSample
		health string
		role   string
	}{
		{"not sampled", brokerSample{}, "unknown", "SLAVE"},
		{"answering", brokerSample{Info: &protocol.BrokerRuntimeInfo{BrokerRole: "SYNC_MASTER", MsgPutTotal: 3}}, "up", "SYNC_MASTER"},
		{"down", brokerSample{Err: "connection refused"}, "down", "SLAVE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := brokerRow(ref, tt.bs)
			if row.Health != tt.health || row.Role != tt.role || (tt.health == "down") != (row.Error != "") {
				t.Errorf("row = %+v", row)
			}
		})
	}
}
