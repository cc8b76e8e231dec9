package benchrun

import (
	"fmt"
	"testing"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/protocol"
)

// TestBenchDrainBacklog: two pulls in flight over queues of different
// lengths (one of them empty) read every message once and commit each
// queue's end.
func TestBenchDrainBacklog(t *testing.T) {
	b := brokertest.Start(t)
	b.CreateTopic("T", 3)
	p, err := client.NewProducer(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for q, n := range []int{600, 5, 0} {
		for i := range n {
			if _, err := p.Send(t.Context(), &protocol.Message{Topic: "T", Body: fmt.Appendf(nil, "%d-%d", q, i)}, client.ToQueue(int32(q))); err != nil {
				t.Fatal(err)
			}
		}
	}
	pc, err := client.NewPullConsumer(b.Addr(), "G")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	maxOff, stored, err := queueEnds(t.Context(), pc, "T", 3)
	if err != nil || stored != 605 {
		t.Fatalf("queue ends %v (%d stored), %v", maxOff, stored, err)
	}
	cons := newRecorder()
	cons.open()
	drainBacklog(t.Context(), pc, "T", maxOff, 256, 2, cons)
	cons.close()
	if cons.msgs.Load() != 605 || cons.errs.Load() != 0 || cons.hist.TotalCount() != 4 { // pulls: 256, 256, 88 and 5
		t.Errorf("consumed %d (%d errors) in %d pulls, want 605 in 4", cons.msgs.Load(), cons.errs.Load(), cons.hist.TotalCount())
	}
	for q, want := range maxOff[:2] {
		if off, ok := b.CommittedOffset("G", "T", int32(q)); !ok || off != want {
			t.Errorf("queue %d committed %d, %v; want %d", q, off, ok, want)
		}
	}
}
