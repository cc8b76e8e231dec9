package brokerconf

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Properties renders c as a broker.conf: every key in alphabetical order,
// each after a # line with its documentation. Parse gives c back.
// `wharf broker --print-config` prints it.
func (c Config) Properties() string {
	fs := append([]field(nil), fields()...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].key < fs[j].key })
	var b strings.Builder
	b.WriteString("# Wharf broker.conf (RocketMQ properties format: key=value, # comments).\n")
	v := reflect.ValueOf(c)
	for _, f := range fs {
		fmt.Fprintf(&b, "\n# %s\n%s=%s\n", f.doc, f.key, escapeValue(formatValue(v.Field(f.index))))
	}
	return b.String()
}

// derivedDefaults describes the defaults that depend on the host or on other
// keys, for MarkdownTable.
var derivedDefaults = map[string]string{
	"brokerName":         "host name (`broker-a` if unknown)",
	"haListenPort":       "listenPort + 1",
	"metricsPort":        "listenPort + 3",
	"storePathCommitLog": "`${storePathRootDir}/commitlog`",
}

// MarkdownTable documents the keys for docs/OPERATIONS.md: a table of every
// key (key | default | meaning) in Config's order, which groups related
// keys, then a table of the RocketMQ keys Wharf accepts without effect.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Key | Default | Meaning |\n|---|---|---|\n")
	d := Default()
	v := reflect.ValueOf(d)
	for _, f := range fields() {
		def, ok := derivedDefaults[f.key]
		if !ok {
			def = "`" + formatValue(v.Field(f.index)) + "`"
			if def == "``" {
				def = "(empty)"
			}
		}
		unit := ""
		if u := unitName(v.Field(f.index).Interface()); u != "" && def != "(empty)" {
			unit = " " + u
		}
		fmt.Fprintf(&b, "| `%s` | %s%s | %s |\n", f.key, def, unit, mdCell(f.doc))
	}
	b.WriteString("\nAccepted for compatibility with RocketMQ's broker.conf, with a warning, but without effect in Wharf:\n\n")
	b.WriteString("| Key | Why it has no effect |\n|---|---|\n")
	keys := make([]string, 0, len(ignoredKeys))
	for k := range ignoredKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		why := ignoredKeys[k].why
		if ignoredKeys[k].rejectTrue {
			why += " (`true` is an error)"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", k, mdCell(why))
	}
	return b.String()
}

// mdCell escapes text for a markdown table cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
