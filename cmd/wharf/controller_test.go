package main

import (
	"strings"
	"testing"
)

func TestControllerNodeConfig(t *testing.T) {
	const peers = "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"
	base := defaultControllerConfig()
	base.ControllerPeers, base.ControllerSelfID, base.StorePathRootDir = peers, "n1", "/data"
	cfg, listen, err := controllerNodeConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if listen != "127.0.0.1:9868" || cfg.Dir != "/data/controller" || len(cfg.Peers) != 3 || cfg.Peers[cfg.SelfID] != "127.0.0.1:9868" {
		t.Fatalf("listen %s, dir %s, peers %v, self %d", listen, cfg.Dir, cfg.Peers, cfg.SelfID)
	}
	// Raft ids depend on the names only, not on the list's order.
	other := base
	other.ControllerPeers = "n2-127.0.0.1:9858;n1-127.0.0.1:9868;n0-127.0.0.1:9878"
	if cfg2, _, err := controllerNodeConfig(other); err != nil || cfg2.SelfID != cfg.SelfID {
		t.Fatalf("reordered peers: self %d (err %v), want %d", cfg2.SelfID, err, cfg.SelfID)
	}
	bind := base
	bind.BindAddress = "0.0.0.0"
	if _, listen, _ := controllerNodeConfig(bind); listen != "0.0.0.0:9868" {
		t.Fatalf("--bindAddress: listen %s", listen)
	}
	for name, tc := range map[string]struct {
		mutate func(*controllerConfig)
		want   string
	}{
		"self not a peer":  {func(c *controllerConfig) { c.ControllerSelfID = "n9" }, "not in --controllerPeers"},
		"no peers":         {func(c *controllerConfig) { c.ControllerPeers = " ; " }, "names no peer"},
		"entry without id": {func(c *controllerConfig) { c.ControllerPeers = "127.0.0.1:9878" }, "want ID-HOST:PORT"},
		"entry no port":    {func(c *controllerConfig) { c.ControllerPeers = "n0-127.0.0.1" }, "missing port"},
		"same id twice":    {func(c *controllerConfig) { c.ControllerPeers = "n0-a:1;n0-b:2" }, "clashes"},
		"zero heartbeat":   {func(c *controllerConfig) { c.ControllerHeartBeatTimeoutMills = 0 }, "must be > 0"},
		"tick too long":    {func(c *controllerConfig) { c.TickIntervalMillis = 1000 }, "must be below"},
	} {
		c := base
		tc.mutate(&c)
		if _, _, err := controllerNodeConfig(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}
