package benchrun

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestBenchParseScenarios(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string
		wantErr string
	}{
		{args: []string{"all"}, want: scenarios},
		{args: []string{"disk"}, want: []string{"disk-probe"}},
		// canonical order, once each, blanks ignored
		{args: []string{"e2e-10k, sync-1", "sync-1,,async-256"}, want: []string{"async-256", "sync-1", "e2e-10k"}},
		{args: []string{"all", "disk-probe"}, want: scenarios},
		// the cluster scenarios are not in "all"; "cluster" names them
		{args: []string{"groups-2-vs-1,cluster"}, want: []string{"route-propagation", "groups-2-vs-1"}},
		{args: []string{"route-propagation", "sync-1"}, want: []string{"sync-1", "route-propagation"}},
		{args: []string{"sync-1,nope"}, wantErr: `--scenario "nope": want one of async-256, `},
		{args: []string{""}, wantErr: "--scenario: nothing to run"},
		{args: nil, wantErr: "--scenario: nothing to run"},
	} {
		got, err := parseScenarios(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

func TestBenchOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(o *Options)
		wantErr string
	}{
		{"defaults", func(o *Options) {}, ""},
		{"quick", func(o *Options) { *o = QuickOptions() }, ""},
		{"sizes at the bounds", func(o *Options) { o.Sizes = []int{16, 4 << 20} }, ""},
		{"size too small", func(o *Options) { o.Sizes = []int{1024, 15} }, "--size 15: want 16..4194304"},
		{"size too large", func(o *Options) { o.Sizes = []int{4<<20 + 1} }, "--size 4194305"},
		{"duration", func(o *Options) { o.Duration = 0 }, "--duration must be positive"},
		{"backlog", func(o *Options) { o.Backlog = 0 }, "--backlog must be at least 1"},
		{"rate", func(o *Options) { o.Rate = 0 }, "--rate must be at least 1"},
		{"pull batch low", func(o *Options) { o.PullBatch = 0 }, "--pull-batch must be in 1..1024"},
		{"pull batch high", func(o *Options) { o.PullBatch = 1025 }, "--pull-batch must be in 1..1024"},
		{"no pull in flight", func(o *Options) { o.PullInflight = 0 }, "--pull-inflight must be in 1..64"},
		{"queues", func(o *Options) { o.Queues = 0 }, "--queues must be at least 1"},
		{"batch inflight", func(o *Options) { o.BatchInflight = 0 }, "--batch-inflight must be at least 1"},
		{"flush mode", func(o *Options) { o.FlushMode = "SYNC" }, "--flush-mode: want ASYNC_FLUSH or SYNC_FLUSH"},
		{"sync flush", func(o *Options) { o.FlushMode = "SYNC_FLUSH" }, ""},
	} {
		o := DefaultOptions()
		tc.edit(&o)
		err := o.check()
		if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// QuickOptions shortens the runs and nothing else: the command line
// applies its values only to the flags not given.
func TestBenchQuickOptionsShortenOnlyTheRuns(t *testing.T) {
	d, q := DefaultOptions(), QuickOptions()
	if q.Duration != 1500*time.Millisecond || q.Warmup != 300*time.Millisecond || q.Backlog != 100_000 ||
		q.Settle != 1500*time.Millisecond || q.Fsyncs != 500 {
		t.Fatalf("quick options %+v", q)
	}
	q.Duration, q.Warmup, q.Backlog, q.Settle, q.Fsyncs = d.Duration, d.Warmup, d.Backlog, d.Settle, d.Fsyncs
	if !reflect.DeepEqual(q, d) {
		t.Fatalf("QuickOptions differs from DefaultOptions in more than the runs:\n%+v\n%+v", q, d)
	}
}

func TestBenchResolveFillsPaths(t *testing.T) {
	o := DefaultOptions()
	o.Scenarios = []string{"disk"}
	o.ProfileDir = t.TempDir() + "/profiles/x"
	if err := o.resolve(); err != nil {
		t.Fatal(err)
	}
	if o.BrokerBin == "" || o.StoreDir == "" || !reflect.DeepEqual(o.Scenarios, []string{"disk-probe"}) {
		t.Fatalf("resolved %+v", o)
	}
	if err := o.fillPaths(); err != nil {
		t.Fatalf("profile dir not created: %v", err)
	}
}
