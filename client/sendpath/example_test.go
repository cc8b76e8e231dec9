package sendpath_test

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// An event-driven caller (the simulator's producer): no goroutine, no
// sleep. Every event, an answer or a timer, is fed to the core, which says
// what to do: send an attempt, arm a timer for a retry, or finish.
func Example_eventDriven() {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	table := sendpath.NewTable(sendpath.Config{
		RouteTTL: 30 * time.Second, Retries: 2, Backoff: 100 * time.Millisecond, AvoidFor: time.Second,
	})
	// The broker a is busy, b stores; each answer takes 2 ms.
	answer := map[string]protocol.Status{"a": protocol.StatusSystemBusy, "b": protocol.StatusOK}
	type event struct {
		at    time.Time
		timer bool              // a retry's timer, else an answer
		to    sendpath.QueueRef // the attempt answered
		out   sendpath.Outcome  // its outcome
	}
	var events []event // the caller's event queue, in time order
	s := table.Begin("orders", sendpath.AnyQueue, start.Add(3*time.Second))

	// attempt acts on the core's next step at now.
	attempt := func(now time.Time) {
		st := s.Next(now)
		if st.Fetch { // a route arrives (from the broker, or later a name server)
			fmt.Println(now.Sub(start), "fetch the route of", s.Topic())
			s.Routed(sendpath.Route{Topic: "orders", Version: 1, Fetched: now, Queues: []sendpath.QueueRef{
				{Broker: "a", QueueID: 0}, {Broker: "a", QueueID: 1}, {Broker: "b", QueueID: 0},
			}})
			st = s.Next(now)
		}
		fmt.Println(now.Sub(start), st)
		out := sendpath.Outcome{Failure: sendpath.Answered, Status: answer[st.To.Broker]}
		events = append(events, event{at: now.Add(2 * time.Millisecond), to: st.To, out: out})
	}
	attempt(start)
	for len(events) > 0 {
		ev := events[0]
		events = events[1:]
		if ev.timer {
			attempt(ev.at)
			continue
		}
		d := s.Outcome(ev.at, ev.to, ev.out)
		if d.Verdict != sendpath.Retry {
			fmt.Println(ev.at.Sub(start), ev.to, ev.out.Status, "->", d.Verdict)
			continue
		}
		fmt.Println(ev.at.Sub(start), ev.to, ev.out.Status, "-> retry in", d.At.Sub(ev.at))
		events = append(events, event{at: d.At, timer: true})
	}
	// Output:
	// 0s fetch the route of orders
	// 0s attempt 1: send to a/0
	// 2ms a/0 SYSTEM_BUSY -> retry in 100ms
	// 102ms attempt 2: send to b/0
	// 104ms b/0 SUCCESS -> done
}
