package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestDashboardCommand: --namesrv is required; startDashboard serves the
// page on the address asked (port 0: any), says its URL, and stop ends it.
func TestDashboardCommand(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"dashboard"})
	root.SetOut(io.Discard)
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--namesrv is required") {
		t.Errorf("without --namesrv: %v", err)
	}
	var logs bytes.Buffer
	d, err := startDashboard(dashboardConfig{Namesrv: "127.0.0.1:1", Listen: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.url, "http://127.0.0.1:") || !strings.Contains(logs.String(), d.url) {
		t.Errorf("url %q, logs %q", d.url, logs.String())
	}
	resp, err := http.Get(d.url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Wharf dashboard") {
		t.Errorf("GET /: %d %.100s", resp.StatusCode, body)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(d.url); err == nil {
		t.Error("the dashboard still serves after stop")
	}
	if _, err := startDashboard(dashboardConfig{Namesrv: "x", Listen: "127.0.0.1:-1"}, slog.Default()); err == nil {
		t.Error("a bad listen address started")
	}
}
