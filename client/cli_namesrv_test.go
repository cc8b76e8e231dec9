package client

import (
	"errors"
	"slices"
	"testing"

	"github.com/wharfmq/wharf/internal/brokertest"
)

// NameServerTopics lists the routes' topics; DeleteTopicInNameServers
// drops a topic from every name server's routes, not only the one the
// Admin asks.
func TestAdminNameServerTopicsAndDelete(t *testing.T) {
	ns1, ns2 := brokertest.StartNameServer(t), brokertest.StartNameServer(t)
	b := brokertest.Start(t)
	b.CreateTopic("orders", 1)
	b.CreateTopic("audit", 1)
	b.RegisterWith(ns1, "c1", "g1")
	b.RegisterWith(ns2, "c1", "g1")
	ctx := testCtx(t)
	a, err := NewAdmin("", WithNameServer(ns1.Addr()+";"+ns2.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	names, err := a.NameServerTopics(ctx)
	if err != nil || !slices.Contains(names, "orders") || !slices.Contains(names, "audit") {
		t.Fatalf("topics %v, %v", names, err)
	}
	if err := a.DeleteTopicInNameServers(ctx, "orders", ""); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []*brokertest.NameServer{ns1, ns2} {
		one, err := NewAdmin("", WithNameServer(ns.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := one.TopicRoute(ctx, "orders"); !errors.Is(err, ErrTopicNotExist) {
			t.Errorf("route of orders on %s after the delete: %v", ns.Addr(), err)
		}
		if _, err := one.TopicRoute(ctx, "audit"); err != nil {
			t.Errorf("route of audit on %s: %v", ns.Addr(), err)
		}
		one.Close()
	}
	if _, err := (&Admin{}).NameServerTopics(ctx); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("without WithNameServer: %v", err)
	}
}
