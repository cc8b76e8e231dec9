package brokerconf

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// configSource is config.go itself: the doc comments of Config's fields are
// the keys' documentation, so flag usage, Properties and MarkdownTable cannot
// drift from the code.
//
//go:embed config.go
var configSource string

// field describes one key: a field of Config.
type field struct {
	key   string // broker.conf key and flag name (the conf tag)
	name  string // Go field name
	index int    // index in Config
	doc   string // the field's doc comment, on one line
}

// fields lists the keys in Config's order.
var fields = sync.OnceValue(func() []field {
	docs := fieldDocs(configSource)
	t := reflect.TypeFor[Config]()
	out := make([]field, 0, t.NumField())
	for i := range t.NumField() {
		sf := t.Field(i)
		out = append(out, field{key: sf.Tag.Get("conf"), name: sf.Name, index: i, doc: docs[sf.Name]})
	}
	return out
})

// fieldByKey maps a key to its field.
var fieldByKey = sync.OnceValue(func() map[string]field {
	m := map[string]field{}
	for _, f := range fields() {
		m[f.key] = f
	}
	return m
})

// fieldDocs returns the doc comment of each field of the Config struct in src.
func fieldDocs(src string) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", src, parser.ParseComments)
	if err != nil {
		panic(fmt.Sprintf("brokerconf: parse embedded config.go: %v", err)) // it compiled, so it parses
	}
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fl := range st.Fields.List {
			doc := strings.Join(strings.Fields(fl.Doc.Text()), " ")
			for _, id := range fl.Names {
				docs[id.Name] = doc
			}
		}
		return false
	})
	return docs
}

// typeName names a key's type for flag help and error messages.
func typeName(v reflect.Value) string {
	if u := unitName(v.Interface()); u != "" {
		return u
	}
	switch v.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64:
		return "int"
	}
	return "string"
}

// describe says what a value of v's type looks like, for error messages.
func describe(v reflect.Value) string {
	switch v.Interface().(type) {
	case Millis:
		return "an integer number of milliseconds"
	case Seconds:
		return "an integer number of seconds"
	case Hours:
		return "an integer number of hours"
	}
	switch v.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	}
	return "a string"
}

// setValue parses s into v according to v's type.
func setValue(v reflect.Value, s string) error {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.ToLower(s))
		if err != nil {
			return fmt.Errorf("%q is not %s", s, describe(v))
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return fmt.Errorf("%q is out of range for %s", s, describe(v))
			}
			return fmt.Errorf("%q is not %s", s, describe(v))
		}
		v.SetInt(n)
	default:
		panic(fmt.Sprintf("brokerconf: unsupported field kind %s", v.Kind()))
	}
	return nil
}

// formatValue renders v as broker.conf writes it.
func formatValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	}
	panic(fmt.Sprintf("brokerconf: unsupported field kind %s", v.Kind()))
}

// set parses s into the field of key.
func (c *Config) set(f field, s string) error {
	return setValue(reflect.ValueOf(c).Elem().Field(f.index), s)
}
