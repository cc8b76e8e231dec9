package brokerconf

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/pflag"
)

func TestReadProperties(t *testing.T) {
	tests := []struct {
		name, in string
		want     []property
	}{
		{"separators", "a=1\nb: 2\nc 3\nd\t=\t4\ne = :5\nf==6\n",
			[]property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}, {"d", "4", 4}, {"e", ":5", 5}, {"f", "=6", 6}}},
		{"comments and blanks", "# comment\n! also a comment\n\n   \n  # indented comment\nkey=v # not a comment\n",
			[]property{{"key", "v # not a comment", 6}}},
		{"leading and trailing whitespace", "   key =   value  \t\n",
			[]property{{"key", "value", 1}}},
		{"escaped trailing space kept", "key=value\\ \\  \n",
			[]property{{"key", "value  ", 1}}},
		{"empty value", "key=\nother\n",
			[]property{{"key", "", 1}, {"other", "", 2}}},
		{"continuation", "key=one \\\n    two \\\n\tthree\nnext=1\n",
			[]property{{"key", "one two three", 1}, {"next", "1", 4}}},
		{"even backslashes do not continue", "key=a\\\\\nnext=1\n",
			[]property{{"key", `a\`, 1}, {"next", "1", 2}}},
		{"continuation line is not a comment", "key=a\\\n#b\n",
			[]property{{"key", "a#b", 1}}},
		{"comment does not continue", "# comment \\\nkey=1\n",
			[]property{{"key", "1", 2}}},
		{"continuation at end of input", "key=a\\",
			[]property{{"key", "a", 1}}},
		{"escapes", `key=\t|\n|\r|\f|\\|\=|\:|\#|\u0041|\u00e9|\uD83D\uDE00|\q`,
			[]property{{"key", "\t|\n|\r|\f|\\|=|:|#|A|é|😀|q", 1}}},
		{"escaped separator in key", "a\\=b\\ c=d\n",
			[]property{{"a=b c", "d", 1}}},
		{"CRLF and CR line ends", "a=1\r\nb=2\rc=3",
			[]property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}}},
		{"byte order mark", "\uFEFFa=1\n",
			[]property{{"a", "1", 1}}},
		{"UTF-8 value", "a=héllo wörld\n",
			[]property{{"a", "héllo wörld", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readProperties(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestReadPropertiesMalformedEscape(t *testing.T) {
	_, err := readProperties(strings.NewReader("a=1\n\nb=\\u12G4\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), `\uXXXX`) {
		t.Fatalf("error %v, want a malformed \\uXXXX escape on line 3", err)
	}
}

func TestParseSetsKeys(t *testing.T) {
	in := `# a typical broker.conf
brokerClusterName = TestCluster
brokerName = broker-b
brokerId = 0
brokerRole = SYNC_MASTER
flushDiskType = SYNC_FLUSH
listenPort = 20911
storePathRootDir = /var/lib/wharf
fileReservedTime = 48
deleteWhen = 04;16
autoCreateTopicEnable = false
syncFlushTimeout = 2500
mappedFileSizeCommitLog = 1048576
maxMessageSize = 524288
messageDelayLevel = 1s 5s \
                    1m 2h
`
	c, warns, err := Parse(strings.NewReader(in), "broker.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	want := Default()
	want.BrokerClusterName = "TestCluster"
	want.BrokerName = "broker-b"
	want.BrokerRole = SyncMaster
	want.FlushDiskType = SyncFlush
	want.ListenPort = 20911
	want.HAListenPort = 20912
	want.MetricsPort = 20914 // listenPort + 3
	want.StorePathRootDir = "/var/lib/wharf"
	want.StorePathCommitLog = "/var/lib/wharf/commitlog"
	want.FileReservedTime = 48
	want.DeleteWhen = "04;16"
	want.AutoCreateTopicEnable = false
	want.SyncFlushTimeout = 2500
	want.MappedFileSizeCommitLog = 1 << 20
	want.MaxMessageSize = 512 << 10
	want.MessageDelayLevel = "1s 5s 1m 2h"
	if c != want {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if got := c.SyncFlushTimeout.Duration().String(); got != "2.5s" {
		t.Errorf("SyncFlushTimeout.Duration() = %s", got)
	}
}

func TestParseWarnings(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // substrings, one per warning, in order
	}{
		{"renamed in 4.5.2", "mapedFileSizeCommitLog=1073741824\nmapedFileSizeConsumeQueue=6000000\n", []string{
			"broker.conf:1: unknown key mapedFileSizeCommitLog (did you mean mappedFileSizeCommitLog? RocketMQ 4.5.2 renamed it): ignored",
			"broker.conf:2: unknown key mapedFileSizeConsumeQueue (did you mean mappedFileSizeConsumeQueue?",
		}},
		{"near miss", "\nlistenPrt=1\nflushdisktype=SYNC_FLUSH\nstorePathRoot=/x\n", []string{
			"broker.conf:2: unknown key listenPrt (did you mean listenPort?): ignored",
			"broker.conf:3: unknown key flushdisktype (did you mean flushDiskType?)",
			"broker.conf:4: unknown key storePathRoot (did you mean storePathRootDir?)",
		}},
		{"no suggestion", "somethingElseEntirely=1\n", []string{
			"broker.conf:1: unknown key somethingElseEntirely: ignored",
		}},
		{"RocketMQ spelling", "warmMappedFileEnable=false\n", []string{
			"unknown key warmMappedFileEnable (did you mean warmMapedFileEnable? RocketMQ spells it with one p)",
		}},
		{"no effect", "sendMessageThreadPoolNums=16\nenableDLegerCommitLog=false\n", []string{
			"broker.conf:1: sendMessageThreadPoolNums is accepted for RocketMQ compatibility but has no effect in Wharf",
			"broker.conf:2: enableDLegerCommitLog is accepted",
		}},
		{"set twice", "listenPort=1000\n\nlistenPort=2000\n", []string{
			"broker.conf:3: listenPort is set again (first on line 1); the last value wins",
		}},
		{"clamped", "diskSpaceCleanForciblyRatio=95\ndiskSpaceWarningLevelRatio=20\n", []string{
			"diskSpaceCleanForciblyRatio 95 is outside 30-85; using 85",
			"diskSpaceWarningLevelRatio 20 is outside 35-90; using 35",
			"diskSpaceCleanForciblyRatio 85% is not below diskSpaceWarningLevelRatio 35%",
		}},
		{"sync master without slave copy", "brokerRole=SYNC_MASTER\ninSyncReplicas=1\n", []string{
			"inSyncReplicas=1 with brokerRole=SYNC_MASTER acknowledges sends without any slave copy",
		}},
		{"ha master address on a master", "haMasterAddress=10.0.0.1:10912\n", []string{
			`haMasterAddress "10.0.0.1:10912" is ignored: only a SLAVE uses it`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warns, err := Parse(strings.NewReader(tt.in), "broker.conf")
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", warns, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(warns[i], w) {
					t.Errorf("warning %d: %q does not contain %q", i, warns[i], w)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"not an integer", "# port\nlistenPort=abc\n", []string{`broker.conf:2: listenPort: "abc" is not an integer`}},
		{"not milliseconds", "\n\n\nsyncFlushTimeout=5s\n", []string{`broker.conf:4: syncFlushTimeout: "5s" is not an integer number of milliseconds`}},
		{"not hours", "fileReservedTime=72h\n", []string{`broker.conf:1: fileReservedTime: "72h" is not an integer number of hours`}},
		{"not a bool", "autoCreateTopicEnable=yes\n", []string{`broker.conf:1: autoCreateTopicEnable: "yes" is not true or false`}},
		{"out of range", "listenPort=99999999999999999999\n", []string{`broker.conf:1: listenPort: "99999999999999999999" is out of range for an integer`}},
		{"every error at once", "listenPort=x\nbrokerId=y\n", []string{"broker.conf:1: listenPort", "broker.conf:2: brokerId"}},
		{"line of a continued entry", "a=1\nmaxMessageSize=1\\\n  2x\n", []string{`broker.conf:2: maxMessageSize: "12x" is not an integer`}},
		{"derived port out of range", "listenPort=65535\n", []string{"haListenPort 65536 (listenPort + 1): must be a port 1-65535; set haListenPort"}},
		{"remoting port out of range", "remotingListenPort=70000\n", []string{"remotingListenPort 70000: must be a port 1-65535, or 0 (off)"}},
		{"remoting port clash", "listenPort=10911\nremotingListenPort=10912\n", []string{"remotingListenPort 10912: must differ from listenPort, haListenPort"}},
		{"unsupported mode", "enableDLegerCommitLog=true\n", []string{"broker.conf:1: enableDLegerCommitLog=true is not supported by Wharf"}},
		{"controller mode without controllers", "enableControllerMode=true\n", []string{"controllerAddr is empty: enableControllerMode needs"}},
		{"invalid after loading", "brokerRole=SLAVE\n", []string{"brokerId 0: brokerRole=SLAVE needs brokerId>0", "haMasterAddress is empty"}},
		{"malformed escape", "a=\\u00\n", []string{`broker.conf: line 1: malformed \uXXXX escape`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse(strings.NewReader(tt.in), "broker.conf")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestBoolSpellings(t *testing.T) {
	for in, want := range map[string]bool{"true": true, "TRUE": true, "True": true, "false": false, "FALSE": false, "1": true, "0": false} {
		c, _, err := Parse(strings.NewReader("slaveReadEnable="+in), "x")
		if err != nil {
			t.Errorf("%s: %v", in, err)
		} else if c.SlaveReadEnable != want {
			t.Errorf("%s: got %v", in, c.SlaveReadEnable)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "nope.conf"))
	if err == nil || !strings.Contains(err.Error(), "nope.conf") {
		t.Fatalf("error %v, want one naming the file", err)
	}
}

func writeConf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPrecedence: defaults < file < flags given on the command line.
func TestPrecedence(t *testing.T) {
	conf := writeConf(t, "listenPort=20911\nflushDiskType=SYNC_FLUSH\nstorePathRootDir=/from/file\nbogusKey=1\n")
	tests := []struct {
		name  string
		file  string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{"defaults only", "", nil, func(t *testing.T, c Config) {
			want := Default()
			want.fillDerived()
			if c != want {
				t.Errorf("got %+v, want the defaults", c)
			}
		}},
		{"file over defaults", conf, nil, func(t *testing.T, c Config) {
			if c.ListenPort != 20911 || c.FlushDiskType != SyncFlush || c.StorePathRootDir != "/from/file" {
				t.Errorf("file not applied: %+v", c)
			}
			if c.HAListenPort != 20912 || c.StorePathCommitLog != "/from/file/commitlog" {
				t.Errorf("derived keys not from the file: haListenPort %d storePathCommitLog %s", c.HAListenPort, c.StorePathCommitLog)
			}
			if c.MaxMessageSize != Default().MaxMessageSize {
				t.Errorf("maxMessageSize %d, want the default", c.MaxMessageSize)
			}
		}},
		{"flag over file", conf, []string{"--flushDiskType=ASYNC_FLUSH", "--listenPort", "30911"}, func(t *testing.T, c Config) {
			if c.FlushDiskType != AsyncFlush || c.ListenPort != 30911 {
				t.Errorf("flags not applied: %+v", c)
			}
			if c.HAListenPort != 30912 {
				t.Errorf("haListenPort %d, want listenPort + 1 from the flag", c.HAListenPort)
			}
			if c.StorePathRootDir != "/from/file" {
				t.Errorf("storePathRootDir %q: a flag not given overrode the file", c.StorePathRootDir)
			}
		}},
		{"flag over defaults", "", []string{"--slaveReadEnable", "--autoCreateTopicEnable=false", "--haListenPort=4000"}, func(t *testing.T, c Config) {
			if !c.SlaveReadEnable || c.AutoCreateTopicEnable || c.HAListenPort != 4000 {
				t.Errorf("flags not applied: %+v", c)
			}
		}},
		{"flag given with the default value still wins", conf, []string{"--listenPort=10911"}, func(t *testing.T, c Config) {
			if c.ListenPort != 10911 {
				t.Errorf("listenPort %d, want 10911 from the flag", c.ListenPort)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("broker", pflag.ContinueOnError)
			d := Default()
			d.RegisterFlags(fs)
			fs.StringP("config", "c", "", "broker.conf")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			c, warns, err := Resolve(fs, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if tt.file != "" && (len(warns) != 1 || !strings.Contains(warns[0], "unknown key bogusKey")) {
				t.Errorf("warnings %q, want the unknown bogusKey", warns)
			}
			tt.check(t, c)
		})
	}
}

func TestResolveErrors(t *testing.T) {
	fs := pflag.NewFlagSet("broker", pflag.ContinueOnError)
	d := Default()
	d.RegisterFlags(fs)
	if err := fs.Parse([]string{"--listenPort=abc"}); err == nil || !strings.Contains(err.Error(), `"abc" is not an integer`) {
		t.Errorf("flag parse error %v", err)
	}

	fs = pflag.NewFlagSet("broker", pflag.ContinueOnError)
	d.RegisterFlags(fs)
	if err := fs.Parse([]string{"--brokerRole=SLAVE"}); err != nil {
		t.Fatal(err)
	}
	conf := writeConf(t, "brokerId=1\nhaMasterAddress=127.0.0.1:10912\n")
	if _, _, err := Resolve(fs, conf); err != nil {
		t.Errorf("slave from file + flag: %v", err)
	}
	if _, _, err := Resolve(fs, ""); err == nil || !strings.Contains(err.Error(), "brokerRole=SLAVE needs brokerId>0") {
		t.Errorf("slave without brokerId: %v", err)
	}
	if _, _, err := Resolve(fs, filepath.Join(t.TempDir(), "missing.conf")); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("missing file: %v", err)
	}
}

func TestFlagHelp(t *testing.T) {
	fs := pflag.NewFlagSet("broker", pflag.ContinueOnError)
	d := goldenDefault()
	d.RegisterFlags(fs)
	help := fs.FlagUsages()
	for _, want := range []string{
		"--listenPort int ",
		"TCP port for clients. (default 10911)",
		"--syncFlushTimeout ms ",
		"--fileReservedTime hours ",
		"--slaveReadEnable ",
		"--brokerRole string ",
		"(default \"ASYNC_MASTER\")",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("flag help lacks %q:\n%s", want, help)
		}
	}
}

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{
		"brokerip1":                 "brokerIP1",
		"brokerIP":                  "brokerIP1",
		"listenport":                "listenPort",
		"flushIntervalCommitlog":    "flushIntervalCommitLog",
		"diskMaxUsedSpaceRatioo":    "diskMaxUsedSpaceRatio",
		"sendMessageThreadPoolNum":  "sendMessageThreadPoolNums",
		"x":                         "",
		"totallyUnrelatedKeyName":   "",
		"maxMessageSizeInKilobytes": "",
	} {
		if got := suggest(in); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzEscapeRoundTrip: a value written by escapeValue reads back unchanged,
// and readProperties never panics.
func FuzzEscapeRoundTrip(f *testing.F) {
	for _, s := range []string{"", " lead", "trail ", "a\\b", "tab\there", "new\nline", "#!=:", "é😀", "\x00\x1f\x7f", "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = readProperties(strings.NewReader(s))
		if !utf8.ValidString(s) {
			return
		}
		props, err := readProperties(strings.NewReader("k=" + escapeValue(s) + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(props) != 1 || props[0].key != "k" || props[0].value != s {
			t.Fatalf("escaped %q read back as %+v", s, props)
		}
	})
}
