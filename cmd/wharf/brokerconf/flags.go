package brokerconf

import (
	"reflect"
	"strings"

	"github.com/spf13/pflag"
)

// RegisterFlags registers every key as a flag of fs named exactly like the
// key (--listenPort, --storePathRootDir, --brokerRole, ...), bound to c's
// field: the flag's default is c's current value and its usage is the key's
// documentation. Boolean keys may be given alone (--slaveReadEnable) or with
// a value (--autoCreateTopicEnable=false). The command registers -c/--config
// itself and calls Resolve.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	v := reflect.ValueOf(c).Elem()
	for _, f := range fields() {
		fl := fs.VarPF(flagValue{v.Field(f.index)}, f.key, "", f.doc)
		if v.Field(f.index).Kind() == reflect.Bool {
			fl.NoOptDefVal = "true"
		}
	}
}

// flagValue is a pflag.Value bound to one field of a Config.
type flagValue struct{ v reflect.Value }

func (f flagValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	return formatValue(f.v)
}

func (f flagValue) Set(s string) error {
	if f.v.Kind() != reflect.String {
		s = strings.TrimSpace(s)
	}
	return setValue(f.v, s)
}

func (f flagValue) Type() string { return typeName(f.v) }
