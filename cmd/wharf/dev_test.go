package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
)

// brokerFlagSet parses args as `wharf broker`'s flags.
func brokerFlagSet(t *testing.T, args []string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("broker", pflag.ContinueOnError)
	defaults := brokerconf.Default()
	defaults.RegisterFlags(fs)
	fs.String("log-level", "info", "")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return fs
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestDevPlan: `wharf dev` runs a name server and two groups of a master and
// a slave on the documented ports, each slave on its master's derived HA
// port, every broker registered with the name server, in its own store;
// and every broker's flags are valid broker flags.
func TestDevPlan(t *testing.T) {
	c := defaultDevConfig()
	c.Data, c.BrokerArgs = "d", []string{"--flushDiskType", "SYNC_FLUSH"}
	plan := devPlan(c)
	want := []struct{ name, addr, group, id, role, ha string }{
		{"namesrv", "127.0.0.1:9876", "", "", "", ""},
		{"broker-a-0", "127.0.0.1:10911", "broker-a", "0", "SYNC_MASTER", ""},
		{"broker-a-1", "127.0.0.1:10921", "broker-a", "1", "SLAVE", "127.0.0.1:10912"},
		{"broker-b-0", "127.0.0.1:10931", "broker-b", "0", "SYNC_MASTER", ""},
		{"broker-b-1", "127.0.0.1:10941", "broker-b", "1", "SLAVE", "127.0.0.1:10932"},
	}
	if len(plan) != len(want) {
		t.Fatalf("%d daemons, want %d", len(plan), len(want))
	}
	for i, w := range want {
		d := plan[i]
		if d.name != w.name || d.addr != w.addr {
			t.Errorf("daemon %d: %s on %s, want %s on %s", i, d.name, d.addr, w.name, w.addr)
		}
		if i == 0 {
			if d.args[0] != "namesrv" || d.dir != "" {
				t.Errorf("name server: %q (dir %q)", d.args, d.dir)
			}
			continue
		}
		if d.args[0] != "broker" {
			t.Fatalf("%s: %q", d.name, d.args)
		}
		cfg, _, err := brokerconf.Resolve(brokerFlagSet(t, d.args[1:]), "")
		if err != nil {
			t.Fatalf("%s: %q: %v", d.name, d.args, err)
		}
		if cfg.BrokerName != w.group || cfg.BrokerRole != w.role || cfg.HAMasterAddress != w.ha ||
			cfg.NamesrvAddr != "127.0.0.1:9876" || cfg.BrokerClusterName != "DefaultCluster" ||
			cfg.StorePathRootDir != filepath.Join("d", w.name) || cfg.FlushDiskType != "SYNC_FLUSH" ||
			cfg.EffectiveHAListenPort() != cfg.ListenPort+1 || strings.TrimPrefix(d.addr, "127.0.0.1:") != itoa(cfg.ListenPort) {
			t.Errorf("%s: %+v", d.name, cfg)
		}
		if w.id != itoa(int(cfg.BrokerID)) {
			t.Errorf("%s: brokerId %d", d.name, cfg.BrokerID)
		}
	}
}

// TestDevLog: daemon output is forwarded in whole lines with the daemon's
// name, however it is split into writes, and the last lines are kept for
// error messages.
func TestDevLog(t *testing.T) {
	var out bytes.Buffer
	l := newDevLog("broker-a-0", &out, &sync.Mutex{})
	if got := l.tail(); got != "    (no output)" {
		t.Fatalf("tail of nothing: %q", got)
	}
	for _, w := range []string{"one\ntw", "o\n", "thr"} {
		l.Write([]byte(w))
	}
	if want := "broker-a-0 | one\nbroker-a-0 | two\n"; out.String() != want {
		t.Fatalf("forwarded %q, want %q", out.String(), want)
	}
	if got := l.tail(); got != "    one\n    two\n    thr" {
		t.Fatalf("tail %q", got)
	}
	for range 2 * devTailLines {
		l.Write([]byte("x\n"))
	}
	if n := strings.Count(l.tail(), "\n") + 1; n != devTailLines {
		t.Fatalf("tail keeps %d lines, want %d", n, devTailLines)
	}
}
