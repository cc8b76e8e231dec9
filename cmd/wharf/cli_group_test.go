package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestCLIGroupListDescribe: two `consume` members of one group share a
// topic on an in-process broker; group list and describe show them.
func TestCLIGroupListDescribe(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond))
	b.CreateTopic("T", 4)

	out, errOut, err := runCLI(t, "group", "list", "--broker", b.Addr())
	if err != nil || !strings.Contains(out, "no consumer groups") {
		t.Fatalf("empty list: %v\n%s\n%s", err, out, errOut)
	}

	var wg sync.WaitGroup
	reports := make([]consumeReport, 2)
	for i, id := range []string{"cli-a", "cli-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, err := runCLI(t, "consume", "--broker", b.Addr(), "--topic", "T", "--group", "G",
				"--client-id", id, "--idle-exit", "1500ms", "--suspend", "200ms", "--json")
			if err != nil {
				t.Errorf("consume %s: %v\n%s", id, err, errOut)
				return
			}
			lastJSON(t, out, &reports[i])
		}()
	}
	var m map[string][]protocol.QueueRef
	if !testwait.Until(testwait.Wall, 5*time.Second, func() bool {
		m = b.GroupMembers("G")
		n := 0
		for _, refs := range m {
			for _, r := range refs {
				if r.Topic == "T" {
					n++
				}
			}
		}
		return len(m) == 2 && n == 4
	}) {
		t.Fatalf("members %v", m)
	}
	p, err := client.NewProducer(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := p.Send(context.Background(), &protocol.Message{Topic: "T", Body: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()

	out, _, err = runCLI(t, "group", "list", "--broker", b.Addr(), "--json")
	var list groupListJSON
	if err != nil {
		t.Fatal(err)
	}
	lastJSON(t, out, &list)
	if len(list.Groups) != 1 || list.Groups[0].Group != "G" || list.Groups[0].Members != 2 {
		t.Errorf("list: %s", out)
	}
	out, _, err = runCLI(t, "group", "describe", "--broker", b.Addr(), "--group", "G")
	if err != nil || !strings.Contains(out, "cli-a") || !strings.Contains(out, "cli-b") || !strings.Contains(out, "%RETRY%G") {
		t.Errorf("describe: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "group", "describe", "--broker", b.Addr(), "--group", "G", "--json")
	var d groupDescribeJSON
	if err != nil {
		t.Fatal(err)
	}
	lastJSON(t, out, &d)
	if len(d.Members) != 2 || len(d.Queues) != 5 {
		t.Errorf("describe --json: %s", out)
	}
	if _, _, err := runCLI(t, "group", "describe", "--broker", b.Addr(), "--group", "nope"); err == nil {
		t.Error("describing an unknown group succeeded")
	}
	wg.Wait()
	if got := reports[0].Received + reports[1].Received; got != 40 || reports[0].Received == 0 || reports[1].Received == 0 {
		t.Errorf("received %d and %d, want 40 shared", reports[0].Received, reports[1].Received)
	}
}

func TestCLIProduceDelayFlags(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	if _, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "1", "--delay-level", "3"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "1", "--deliver-at", "2030-01-02T03:04:05Z"); err != nil {
		t.Fatal(err)
	}
	// Both wait in the schedule topic: level 3 in its queue 2, a time in
	// the queue after the levels'.
	level, timed := b.Messages(protocol.ScheduleTopic, 2), b.Messages(protocol.ScheduleTopic, 18)
	if len(level) != 1 || level[0].Property(protocol.PropertyDelay) != "3" ||
		len(timed) != 1 || timed[0].Property(protocol.PropertyTimerDeliverMs) != "1893553445000" {
		t.Errorf("waiting: %v and %v", level, timed)
	}
	for _, args := range [][]string{{"--delay-level", "19"}, {"--deliver-at", "tomorrow"}, {"--deliver-at", "+-1s"},
		{"--delay-level", "1", "--deliver-at", "+1s"}} {
		if _, _, err := runCLI(t, append([]string{"produce", "--broker", b.Addr(), "--topic", "T"}, args...)...); err == nil {
			t.Errorf("produce %v accepted", args)
		}
	}
	now := time.Unix(1000, 0)
	if at, err := parseDeliverAt("+90s", now); err != nil || !at.Equal(now.Add(90*time.Second)) {
		t.Errorf("+90s: %v %v", at, err)
	}
}
