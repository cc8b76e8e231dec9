package delay

import (
	"maps"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

func TestDecide(t *testing.T) {
	retry, dlq := protocol.RetryTopic("g"), protocol.DLQTopic("g")
	cases := []struct {
		name       string
		reconsumed int32 // the stored message's reconsume count
		level      int32 // as asked
		maxTimes   int32 // as asked
		defaultMax int32
		levels     int
		want       Retry
	}{
		{"first retry: level 3", 0, 0, 0, 16, 18, Retry{Topic: retry, Level: 3, Reconsume: 1, MaxTimes: 16}},
		{"each retry one level later", 4, 0, 0, 16, 18, Retry{Topic: retry, Level: 7, Reconsume: 5, MaxTimes: 16}},
		{"level capped at the last", 15, 0, 0, 16, 18, Retry{Topic: retry, Level: 18, Reconsume: 16, MaxTimes: 16}},
		{"the consumer's level", 2, 1, 0, 16, 18, Retry{Topic: retry, Level: 1, Reconsume: 3, MaxTimes: 16}},
		{"the consumer's level, capped", 0, 40, 0, 16, 18, Retry{Topic: retry, Level: 18, Reconsume: 1, MaxTimes: 16}},
		{"exactly max: still a retry", 15, 0, 0, 16, 40, Retry{Topic: retry, Level: 18, Reconsume: 16, MaxTimes: 16}},
		{"past max: dead letter", 16, 0, 0, 16, 18, Retry{Topic: dlq, DeadLetter: true, Reconsume: 17, MaxTimes: 16}},
		{"the consumer's max", 2, 0, 2, 16, 18, Retry{Topic: dlq, DeadLetter: true, Reconsume: 3, MaxTimes: 2}},
		{"the consumer's max, not reached", 1, 0, 2, 16, 18, Retry{Topic: retry, Level: 4, Reconsume: 2, MaxTimes: 2}},
		{"negative max means the default", 1, 0, -5, 3, 18, Retry{Topic: retry, Level: 4, Reconsume: 2, MaxTimes: 3}},
		{"level -1: dead letter at once", 0, -1, 0, 16, 18, Retry{Topic: dlq, DeadLetter: true, Reconsume: 1, MaxTimes: 16}},
		{"dead letter beats the consumer's level", 5, 2, 3, 16, 18, Retry{Topic: dlq, DeadLetter: true, Reconsume: 6, MaxTimes: 3}},
		{"no delay levels: at once", 0, 0, 0, 16, 0, Retry{Topic: retry, Reconsume: 1, MaxTimes: 16}},
		{"few delay levels", 0, 0, 0, 16, 2, Retry{Topic: retry, Level: 2, Reconsume: 1, MaxTimes: 16}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(SendBack{Group: "g", ReconsumeTimes: c.reconsumed, DelayLevel: c.level, MaxReconsumeTimes: c.maxTimes}, c.defaultMax, c.levels)
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestCheckGroup(t *testing.T) {
	// The retry topic %RETRY%<group> must be a valid topic of at most 127 bytes.
	for group, ok := range map[string]bool{"g": true, "group_1-a": true, "": false, "a b": false,
		strings.Repeat("a", 120): true, strings.Repeat("a", 121): false} {
		if err := CheckGroup(group); (err == nil) != ok {
			t.Errorf("group %q: %v", group, err)
		}
	}
}

func TestRetryProperties(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		r     Retry
		want  map[string]string
	}{
		{name: "first retry", props: map[string]string{"KEYS": "k", protocol.PropertyDelay: "2", storage.PropDeliverMs: "9"},
			r: Retry{Level: 3, Reconsume: 1, MaxTimes: 16},
			want: map[string]string{"KEYS": "k", protocol.PropertyRetryTopic: "t", protocol.PropertyOriginMessageID: "ID",
				protocol.PropertyDelay: "3", protocol.PropertyReconsumeTime: "1", protocol.PropertyMaxReconsumeTimes: "16"}},
		{name: "a retry keeps where it first came from",
			props: map[string]string{protocol.PropertyRetryTopic: "orig", protocol.PropertyOriginMessageID: "FIRST",
				protocol.PropertyRealTopic: "x", protocol.PropertyRealQueueID: "1", protocol.PropertyTimerDeliverMs: "5"},
			r: Retry{Level: 4, Reconsume: 2, MaxTimes: 3},
			want: map[string]string{protocol.PropertyRetryTopic: "orig", protocol.PropertyOriginMessageID: "FIRST",
				protocol.PropertyDelay: "4", protocol.PropertyReconsumeTime: "2", protocol.PropertyMaxReconsumeTimes: "3"}},
		{name: "dead letter: no delay", props: nil, r: Retry{DeadLetter: true, Reconsume: 17, MaxTimes: 16},
			want: map[string]string{protocol.PropertyRetryTopic: "t", protocol.PropertyOriginMessageID: "ID",
				protocol.PropertyReconsumeTime: "17", protocol.PropertyMaxReconsumeTimes: "16"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := maps.Clone(c.props)
			got := RetryProperties(c.props, "t", "ID", c.r)
			if !maps.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if !maps.Equal(c.props, before) {
				t.Fatal("the original's properties were modified")
			}
		})
	}
}

func TestUnwrap(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		topic string
		qid   int32
		rest  map[string]string
		ok    bool
	}{
		{name: "level delay", props: map[string]string{protocol.PropertyRealTopic: "t", protocol.PropertyRealQueueID: "3",
			protocol.PropertyDelay: "2", storage.PropDeliverMs: "100", "KEYS": "k"},
			topic: "t", qid: 3, rest: map[string]string{"KEYS": "k"}, ok: true},
		{name: "absolute time", props: map[string]string{protocol.PropertyRealTopic: "t", protocol.PropertyRealQueueID: "0",
			protocol.PropertyTimerDeliverMs: "100"}, topic: "t", qid: 0, rest: map[string]string{}, ok: true},
		{name: "unreadable queue id: 0", props: map[string]string{protocol.PropertyRealTopic: "t", protocol.PropertyRealQueueID: "x"},
			topic: "t", qid: 0, rest: map[string]string{}, ok: true},
		{name: "no topic", props: map[string]string{protocol.PropertyDelay: "1"}, rest: map[string]string{}},
		{name: "no properties", props: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := maps.Clone(c.props)
			topic, qid, rest, ok := Unwrap(c.props)
			if topic != c.topic || qid != c.qid || ok != c.ok || !maps.Equal(rest, c.rest) {
				t.Fatalf("got %q %d %v %v", topic, qid, rest, ok)
			}
			if !maps.Equal(c.props, before) {
				t.Fatal("props modified")
			}
		})
	}
}
