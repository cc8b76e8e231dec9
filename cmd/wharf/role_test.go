package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/protocol"
)

// runBrokerCLI runs `wharf broker ...` in process.
func runBrokerCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "wharf", SilenceUsage: true, SilenceErrors: true}
	addBrokerCommand(root)
	var out syncBuffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"broker"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestRoleCLIFlags: bad flag combinations are refused with what is wrong
// and never reach the broker.
func TestRoleCLIFlags(t *testing.T) {
	b := brokertest.Start(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--set is required"},
		{[]string{"--set", "MASTER"}, `--set "MASTER": unknown role`},
		{[]string{"--set", "SLAVE"}, "--set SLAVE needs --master HOST:PORT"},
		{[]string{"--set", "SLAVE", "--master", "127.0.0.1:1", "--broker-id", "0"}, "--broker-id 0"},
		{[]string{"--set", "SLAVE", "--master", "nohost"}, `master address "nohost"`},
		{[]string{"--set", "ASYNC_MASTER", "--master", "127.0.0.1:1"}, "--master is only for --set SLAVE"},
		{[]string{"--set", "SYNC_MASTER", "--broker-id", "1"}, "--broker-id is only for --set SLAVE"},
	} {
		args := append([]string{"role", "--broker", b.Addr()}, tc.args...)
		if _, err := runBrokerCLI(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("wharf broker %s: %v; want an error with %q", strings.Join(args, " "), err, tc.want)
		}
	}
	if n := b.Count(protocol.CodeUpdateBrokerRole); n != 0 {
		t.Errorf("invalid role changes reached the broker %d times", n)
	}
}

// TestRoleCLIOutput: the role is set (case-insensitively) and the status
// afterwards printed as JSON or tables.
func TestRoleCLIOutput(t *testing.T) {
	b := brokertest.Start(t)
	out, err := runBrokerCLI(t, "role", "--broker", b.Addr(), "--set", "slave", "--master", "127.0.0.1:10912", "--broker-id", "2", "--json")
	if err != nil {
		t.Fatalf("role --set slave: %v\n%s", err, out)
	}
	var st roleJSON
	lastJSON(t, out, &st)
	if st.PreviousRole != "ASYNC_MASTER" || st.Role != "SLAVE" || st.BrokerID != 2 || st.BrokerName != "broker-a" {
		t.Errorf("role --json = %+v", st)
	}
	out, err = runBrokerCLI(t, "role", "--broker", b.Addr(), "--set", "SYNC_MASTER")
	if err != nil {
		t.Fatalf("role --set SYNC_MASTER: %v\n%s", err, out)
	}
	for _, want := range []string{`broker \S+: SLAVE -> SYNC_MASTER\n`, `\nrole +SYNC_MASTER\n`, `\(no slave connected\)`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("role output lacks %s:\n%s", want, out)
		}
	}
	b.Stop()
	if _, err := runBrokerCLI(t, "role", "--broker", b.Addr(), "--set", "ASYNC_MASTER", "--timeout", "2s"); err == nil || !strings.Contains(err.Error(), "broker unavailable") {
		t.Errorf("role of a stopped broker: %v", err)
	}
}
