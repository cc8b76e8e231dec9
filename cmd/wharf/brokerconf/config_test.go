package brokerconf

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// zeroDefaults are the keys whose default is deliberately the zero value.
var zeroDefaults = map[string]bool{
	"brokerId":                      true, // a master
	"haListenPort":                  true, // listenPort + 1
	"remotingListenPort":            true, // RocketMQ's remoting listener is off
	"haMasterAddress":               true, // masters have none
	"brokerIP2":                     true, // brokerIP1
	"namesrvAddr":                   true, // no name server
	"enableControllerMode":          true, // classic master/slave
	"controllerAddr":                true, // no controller
	"storePathCommitLog":            true, // ${storePathRootDir}/commitlog
	"slaveReadEnable":               true, // RocketMQ's default
	"haSlaveCatchUpFromLastSegment": true, // a new slave copies everything the master retains
	"warmMapedFileEnable":           true, // RocketMQ's default; appends go through pwrite
	"syncFlushPrezeroEnable":        true, // zeros ahead cost the fsyncs' tail more than they gain
}

// TestEveryKeyComplete holds the invariants that keep the keys, flags and
// docs in step: every field has a conf tag named after it, a one-line doc
// comment, a flag of the same name with that usage and the default as its
// default, and a non-zero default unless listed in zeroDefaults.
func TestEveryKeyComplete(t *testing.T) {
	d := Default()
	dv := reflect.ValueOf(d)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	d.RegisterFlags(fs)
	typ := reflect.TypeFor[Config]()
	seen := map[string]bool{}
	for i := range typ.NumField() {
		sf := typ.Field(i)
		key := sf.Tag.Get("conf")
		switch {
		case key == "":
			t.Errorf("field %s has no conf tag", sf.Name)
			continue
		case !strings.EqualFold(key, sf.Name):
			t.Errorf("field %s is not named after its key %s", sf.Name, key)
		case seen[key]:
			t.Errorf("key %s appears twice", key)
		}
		seen[key] = true
		f := fieldByKey()[key]
		if f.doc == "" {
			t.Errorf("%s (field %s) has no doc comment", key, sf.Name)
		}
		if strings.ContainsAny(f.doc, "`\n") {
			t.Errorf("%s: doc %q must be one line without backquotes (pflag reads backquotes as the value name)", key, f.doc)
		}
		fl := fs.Lookup(key)
		if fl == nil {
			t.Errorf("%s has no flag", key)
			continue
		}
		if fl.Usage != f.doc {
			t.Errorf("flag --%s usage %q, want the doc %q", key, fl.Usage, f.doc)
		}
		if want := formatValue(dv.Field(i)); fl.DefValue != want {
			t.Errorf("flag --%s default %q, want %q", key, fl.DefValue, want)
		}
		if dv.Field(i).IsZero() != zeroDefaults[key] {
			t.Errorf("%s: default %q is zero: %v; zeroDefaults says %v", key, formatValue(dv.Field(i)), dv.Field(i).IsZero(), zeroDefaults[key])
		}
		if _, ok := ignoredKeys[key]; ok {
			t.Errorf("%s is both a key and an ignored key", key)
		}
	}
	for k := range zeroDefaults {
		if !seen[k] {
			t.Errorf("zeroDefaults lists unknown key %s", k)
		}
	}
	for k := range derivedDefaults {
		if !seen[k] {
			t.Errorf("derivedDefaults lists unknown key %s", k)
		}
	}
	for old, r := range renamedKeys {
		if !seen[r.to] {
			t.Errorf("renamedKeys maps %s to unknown key %s", old, r.to)
		}
		if r.note == "" {
			t.Errorf("renamedKeys: %s has no note", old)
		}
		if seen[old] {
			t.Errorf("renamedKeys lists %s, which is a key", old)
		}
	}
	if n := fs.NFlag(); n != 0 {
		t.Errorf("registering flags marked %d as set", n)
	}
}

func TestDefaultIsValid(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default() does not validate: %v", err)
	}
	if d.StorePathRootDir != "./data" {
		t.Errorf("storePathRootDir %q, want ./data (make run)", d.StorePathRootDir)
	}
	if d.BrokerName == "" {
		t.Error("brokerName is empty")
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output; if the change is intended, run go test -update\n--- got:\n%s", path, got)
	}
}

// goldenDefault is Default() with the host-dependent key fixed.
func goldenDefault() Config {
	d := Default()
	d.BrokerName = "broker-a"
	return d
}

func TestPropertiesGolden(t *testing.T) {
	golden(t, "default.properties", goldenDefault().Properties())
}

func TestMarkdownTableGolden(t *testing.T) {
	golden(t, "keys.md", MarkdownTable())
}

// TestOperationsGuideHasTheKeys: section 13 of docs/OPERATIONS.md is the
// generated table, word for word (it had drifted from the code when edited
// by hand).
func TestOperationsGuideHasTheKeys(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), MarkdownTable()) {
		t.Error("docs/OPERATIONS.md, section 13, is not brokerconf.MarkdownTable()'s output: paste testdata/keys.md there (after go test -update)")
	}
}

// TestPropertiesRoundTrip: Parse of Properties gives the same Config back,
// also for values that need escapes.
func TestPropertiesRoundTrip(t *testing.T) {
	c := goldenDefault()
	c.fillDerived()
	c.BrokerClusterName = "Ünïcode-cluster"
	c.MessageDelayLevel = " 1s\t5s\n10s "
	c.NamesrvAddr = "a:1;b:2"
	got, warns, err := Parse(strings.NewReader(c.Properties()), "printed.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	if got != c {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, c)
	}
}
