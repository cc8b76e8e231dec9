package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// syncBuffer is a bytes.Buffer safe for a command's concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Len is how many bytes were written, without copying them.
func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runCLI runs the client commands with args and returns stdout, stderr and
// the error RunE returned.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := &cobra.Command{Use: "wharf", SilenceUsage: true, SilenceErrors: true}
	addClientCommands(root)
	addClusterCommands(root)
	var out, errOut syncBuffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// lastJSON decodes the last line of out into v.
func lastJSON(t *testing.T, out string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), v); err != nil {
		t.Fatalf("last line %q is not JSON: %v\nfull output:\n%s", last, err, out)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestProduceConsumeQueryEndToEnd(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	keys := filepath.Join(t.TempDir(), "keys.txt")
	out, stderr, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "500", "--size", "64",
		"--key", "K", "--tag", "x", "--inflight", "16", "--json", "--keys-out", keys)
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	var rep produceReport
	lastJSON(t, out, &rep)
	if rep.Sent != 500 || rep.Acked != 500 || rep.Failed != 0 || rep.Stopped != "done" || rep.P50Ms <= 0 || rep.MsgsPerS <= 0 {
		t.Fatalf("produce report %+v", rep)
	}
	if b.Total("T") != 500 {
		t.Fatalf("broker holds %d messages", b.Total("T"))
	}
	lines := readLines(t, keys)
	if len(lines) != 500 {
		t.Fatalf("keys file has %d lines", len(lines))
	}
	seen := map[string]bool{}
	var firstID string
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 4 || !strings.HasPrefix(f[0], "K-") || len(f[1]) != 32 {
			t.Fatalf("keys line %q", l)
		}
		if seen[f[0]] {
			t.Fatalf("key %s twice", f[0])
		}
		seen[f[0]] = true
		if f[0] == "K-7" {
			firstID = f[1]
		}
	}
	for q := range int32(4) {
		for _, m := range b.Messages("T", q) {
			if len(m.Body) != 64 || m.Tags() != "x" {
				t.Fatalf("stored message %+v", m)
			}
		}
	}

	out, stderr, err = runCLI(t, "consume", "--broker", b.Addr(), "--topic", "T", "--group", "G", "--count", "500",
		"--json", "--print", "--suspend", "1s")
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, stderr)
	}
	var crep consumeReport
	lastJSON(t, out, &crep)
	if crep.Received != 500 || crep.Duplicates != 0 || crep.Stopped != "count" {
		t.Fatalf("consume report %+v", crep)
	}
	printed := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(printed) != 501 {
		t.Fatalf("consume printed %d lines, want 500 + JSON", len(printed))
	}
	if f := strings.Split(printed[0], "\t"); len(f) != 5 || !strings.HasPrefix(f[2], "K-") || f[4] != "64" {
		t.Fatalf("print line %q", printed[0])
	}

	// The group's offsets were committed: a second run gets nothing.
	out, _, err = runCLI(t, "consume", "--broker", b.Addr(), "--topic", "T", "--group", "G", "--idle-exit", "300ms", "--json", "--suspend", "1s")
	if err != nil {
		t.Fatal(err)
	}
	lastJSON(t, out, &crep)
	if crep.Received != 0 || crep.Stopped != "idle" {
		t.Fatalf("second consume %+v", crep)
	}

	var qrep queryReport
	out, _, err = runCLI(t, "query", "--broker", b.Addr(), "--topic", "T", "--key", "K-7", "--json")
	if err != nil {
		t.Fatal(err)
	}
	lastJSON(t, out, &qrep)
	if qrep.Count != 1 || qrep.Messages[0].MsgID != firstID || qrep.Messages[0].Keys[0] != "K-7" {
		t.Fatalf("query by key %+v", qrep)
	}
	out, _, err = runCLI(t, "query", "--broker", b.Addr(), "--msgid", firstID, "--json", "--body")
	if err != nil {
		t.Fatal(err)
	}
	lastJSON(t, out, &qrep)
	if qrep.Count != 1 || qrep.Messages[0].Body == nil || !strings.HasPrefix(*qrep.Messages[0].Body, "wharf-7 ") {
		t.Fatalf("query by id %+v", qrep)
	}
	out, _, err = runCLI(t, "query", "--broker", b.Addr(), "--topic", "T", "--key", "nope")
	if err == nil || !strings.Contains(out, "no messages found") {
		t.Fatalf("query of a missing key: %v, %q", err, out)
	}
	out, _, err = runCLI(t, "query", "--broker", b.Addr(), "--topic", "T", "--key", "K-8")
	if err != nil || !strings.Contains(out, "MSG ID") || !strings.Contains(out, "K-8") {
		t.Fatalf("human query: %v\n%s", err, out)
	}
}

func TestProduceBatchAndHumanSummary(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	keys := filepath.Join(t.TempDir(), "keys.txt")
	out, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "95", "--batch", "10", "--queue", "1", "--keys-out", keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sent", "acked", "95", "latency", "p99"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if n := len(b.Messages("T", 1)); n != 95 {
		t.Fatalf("queue 1 holds %d", n)
	}
	lines := readLines(t, keys)
	if len(lines) != 95 {
		t.Fatalf("%d key lines", len(lines))
	}
	offsets := map[string]bool{}
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if f[2] != "1" || len(f[0]) != 32 {
			t.Fatalf("line %q", l)
		}
		offsets[f[3]] = true
	}
	if len(offsets) != 95 {
		t.Fatalf("%d distinct offsets", len(offsets))
	}
}

func TestProduceCountsUnconfirmedAsFailed(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	b.SetStatusHook(func(code protocol.Code, n int) protocol.Status {
		if code == protocol.CodeSendMessage && n%4 == 0 {
			return protocol.StatusFlushDiskTimeout
		}
		return 0
	})
	keys := filepath.Join(t.TempDir(), "keys.txt")
	// One send in flight: each message is its own SEND request (async sends
	// in flight together would be coalesced into SEND_BATCH requests, and the
	// hook counts requests).
	out, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "40", "--inflight", "1", "--json", "--keys-out", keys)
	if err == nil || !strings.Contains(err.Error(), "not acknowledged") {
		t.Fatalf("err = %v", err)
	}
	var rep produceReport
	lastJSON(t, out, &rep)
	if rep.Sent != 40 || rep.Acked != 30 || rep.Failed != 10 || rep.Unconfirmed != 10 || rep.Errors["FLUSH_DISK_TIMEOUT"] != 10 {
		t.Fatalf("report %+v", rep)
	}
	if n := len(readLines(t, keys)); n != 30 {
		t.Fatalf("%d key lines, want only the 30 acked", n)
	}
	if b.Total("T") != 40 {
		t.Fatalf("stored %d (unconfirmed are stored, never resent)", b.Total("T"))
	}
}

func TestProduceStopsWhenBrokerGoes(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 4)
	keys := filepath.Join(t.TempDir(), "keys.txt")
	go func() {
		// 200 messages, however they were batched.
		testwait.Until(testwait.Wall, 15*time.Second, func() bool { return b.Total("T") >= 200 })
		b.Stop()
	}()
	start := time.Now()
	out, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "100000000", "--inflight", "8",
		"--json", "--keys-out", keys, "--key", "K")
	if err == nil || !strings.Contains(err.Error(), "broker unavailable") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("produce took %v to stop", d)
	}
	var rep produceReport
	lastJSON(t, out, &rep)
	if rep.Stopped != "broker_unavailable" || rep.Acked == 0 || rep.Acked >= rep.Sent || rep.Acked+rep.Failed != rep.Sent {
		t.Fatalf("report %+v", rep)
	}
	lines := readLines(t, keys)
	if int64(len(lines)) != rep.Acked {
		t.Fatalf("%d key lines, %d acked", len(lines), rep.Acked)
	}
	// Every acked message is stored (and kept across the clean stop).
	b.Restart()
	stored := map[string]bool{}
	for q := range int32(4) {
		for _, m := range b.Messages("T", q) {
			stored[m.Keys()[0]] = true
		}
	}
	for _, l := range lines {
		if k := strings.Split(l, "\t")[0]; !stored[k] {
			t.Fatalf("acked %s is not stored", k)
		}
	}
}

func TestConsumeStopsWhenBrokerGoes(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	go func() {
		// Consuming: the pulls of both queues have reached the broker.
		testwait.Until(testwait.Wall, 10*time.Second, func() bool { return b.Count(protocol.CodePullMessage) >= 2 })
		b.Stop()
	}()
	start := time.Now()
	out, _, err := runCLI(t, "consume", "--broker", b.Addr(), "--topic", "T", "--group", "G", "--json")
	if err == nil || !strings.Contains(err.Error(), "broker unavailable") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("consume took %v to stop", d)
	}
	var rep consumeReport
	lastJSON(t, out, &rep)
	if rep.Stopped != "broker_unavailable" {
		t.Fatalf("report %+v", rep)
	}
}

func TestProduceInterrupted(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	go func() {
		// 100 messages, however they were batched: produce has its signal
		// handler installed by now.
		testwait.Until(testwait.Wall, 10*time.Second, func() bool { return b.Total("T") >= 100 })
		syscall.Kill(os.Getpid(), syscall.SIGINT)
	}()
	start := time.Now()
	out, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "100000000", "--json")
	if !errors.Is(err, cliErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("produce took %v to stop", d)
	}
	var rep produceReport
	lastJSON(t, out, &rep)
	if rep.Stopped != "interrupted" || rep.Acked == 0 || int64(b.Total("T")) < rep.Acked {
		t.Fatalf("report %+v, stored %d", rep, b.Total("T"))
	}
}

func TestTopicCommands(t *testing.T) {
	b := brokertest.Start(t)
	out, _, err := runCLI(t, "topic", "create", "--broker", b.Addr(), "--topic", "A", "--queues", "3", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ok map[string]any
	lastJSON(t, out, &ok)
	if ok["ok"] != true || ok["write_queue_nums"] != float64(3) {
		t.Fatalf("create: %v", ok)
	}
	if _, _, err := runCLI(t, "topic", "create", "--broker", b.Addr(), "--topic", "A"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second create: %v", err)
	}
	if _, _, err := runCLI(t, "topic", "update", "--broker", b.Addr(), "--topic", "A", "--write-queues", "5", "--perm", "4"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "topic", "create", "--broker", b.Addr(), "--topic", "B"); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, "topic", "list", "--broker", b.Addr(), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Topics []topicJSON }
	lastJSON(t, out, &list)
	want := []topicJSON{{"A", 3, 5, 4}, {"B", 8, 8, 6}}
	if fmt.Sprint(list.Topics) != fmt.Sprint(want) {
		t.Fatalf("list = %+v, want %+v", list.Topics, want)
	}
	out, _, err = runCLI(t, "topic", "list", "--broker", b.Addr())
	if err != nil || !strings.Contains(out, "TOPIC") || !strings.Contains(out, "R-- (4)") {
		t.Fatalf("human list: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "topic", "delete", "--broker", b.Addr(), "--topic", "A"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "topic", "delete", "--broker", b.Addr(), "--topic", "A"); err == nil {
		t.Fatal("deleting a missing topic succeeded")
	}
}

func TestFlagValidation(t *testing.T) {
	b := brokertest.Start(t)
	tests := [][]string{
		{"produce"},
		{"produce", "--topic", "T", "--count", "0"},
		{"produce", "--topic", "T", "--batch", "0"},
		{"produce", "--topic", "T", "--inflight", "0"},
		{"produce", "--topic", "bad topic"},
		{"produce", "--topic", "T", "--size", "-1"},
		{"consume", "--topic", "T", "--from", "middle"},
		{"consume", "--topic", "T", "--tag-expr", "a ||"},
		{"consume", "--group", "G"},
		{"query", "--topic", "T"},
		{"query", "--key", "k"},
		{"query", "--topic", "T", "--key", "k", "--msgid", "x"},
		{"topic", "create"},
		{"topic", "create", "--topic", "T", "--queues", "0"},
		{"topic", "create", "--topic", "T", "--perm", "9"},
	}
	for _, args := range tests {
		args = append(args, "--broker", b.Addr())
		if _, _, err := runCLI(t, args...); err == nil {
			t.Errorf("wharf %s: no error", strings.Join(args, " "))
		}
	}
	if n := b.Count(protocol.CodeCreateTopic) + b.Count(protocol.CodeSendMessage); n != 0 {
		t.Errorf("invalid commands reached the broker %d times", n)
	}
	// An unreachable broker is an error, quickly.
	b.Stop()
	start := time.Now()
	if _, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T"); err == nil || !strings.Contains(err.Error(), "broker unavailable") {
		t.Errorf("produce to nothing: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestProduceHumanReport pins the text summary of produce, with the rows
// only a stopped or partly failed run prints.
func TestProduceHumanReport(t *testing.T) {
	var out bytes.Buffer
	printProduceReport(&out, &produceFlags{topic: "T"}, produceReport{Sent: 10, Acked: 7, Failed: 3, Unconfirmed: 1,
		MsgsPerS: 70, MBPerS: 0.009, P50Ms: 0.5, P99Ms: 1.25, P999Ms: 2, ElapsedS: 0.1,
		Errors: map[string]int64{"timeout": 2, "FLUSH_DISK_TIMEOUT": 1}, Stopped: "interrupted"})
	want := `topic          T
sent           10
acked          7
failed         3
  unconfirmed  1  (stored, flush/replication not confirmed)
elapsed        0.100 s
throughput     70.0 msg/s          0.009 MB/s
latency        p50 0.500 ms        p99 1.250 ms  p99.9 2.000 ms
error          FLUSH_DISK_TIMEOUT  1
error          timeout             2
stopped        interrupted
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestProduceKeysOutUnwritable: a keys file that cannot be created fails
// the run before any send.
func TestProduceKeysOutUnwritable(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 1)
	keys := filepath.Join(t.TempDir(), "missing", "keys.txt")
	_, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--keys-out", keys)
	if err == nil || !strings.Contains(err.Error(), "missing/keys.txt") {
		t.Fatalf("err = %v", err)
	}
	if b.Total("T") != 0 {
		t.Fatalf("stored %d", b.Total("T"))
	}
}

// TestConsumeInterrupted: on SIGINT consume stops, reports what arrived and
// exits with cliErrInterrupted.
func TestConsumeInterrupted(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 2)
	if _, _, err := runCLI(t, "produce", "--broker", b.Addr(), "--topic", "T", "--count", "20"); err != nil {
		t.Fatal(err)
	}
	go func() {
		// Consuming: the pulls have reached the broker, and the signal
		// handler is installed by then.
		testwait.Until(testwait.Wall, 10*time.Second, func() bool { return b.Count(protocol.CodePullMessage) >= 4 })
		syscall.Kill(os.Getpid(), syscall.SIGINT)
	}()
	out, _, err := runCLI(t, "consume", "--broker", b.Addr(), "--topic", "T", "--group", "G", "--suspend", "1s")
	if !errors.Is(err, cliErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	// How many arrived before the signal depends on the pulls' timing.
	for _, want := range []string{"topic       T\n", "group       G\n", "received    ", "stopped     interrupted\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// TestConsumeHumanReport pins the text summary of consume.
func TestConsumeHumanReport(t *testing.T) {
	var out bytes.Buffer
	printConsumeReport(&out, &consumeFlags{topic: "T", group: "G"}, consumeReport{Received: 5, Duplicates: 1,
		MsgsPerS: 50, MBPerS: 0.001, ElapsedS: 0.25, Stopped: "idle"})
	want := `topic       T
group       G
received    5
duplicates  1
elapsed     0.250 s
throughput  50.0 msg/s  0.001 MB/s
stopped     idle
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
