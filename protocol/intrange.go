package protocol

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Range checks for what msgpack's reflection decoder fills.
//
// msgpack v5.4.1 stores any integer into an int32 or uint32 field by
// truncation (reflect.Value.SetInt: 2^32+5 becomes 5, 2^31 becomes -2^31)
// and a uint64 above MaxInt64 into an int64 field by wrap-around, without an
// error. checkInts walks the same bytes again, with the Go type as its map,
// and reports the first integer that its field cannot hold, so that an
// integer out of range is INVALID_PARAMETER on every request, as the
// hand-written decoders (reader.int) hold it on SEND and in message lists.

// checkInts reports (as a *rangeError) the first integer of b, one msgpack
// value already validated and decoded into a value of type t, that does not
// fit the field msgpack decoded it into.
func checkInts(b []byte, t reflect.Type) error {
	if !holdsInt(t) {
		return nil
	}
	r := &reader{b: b}
	return checkValue(r, t)
}

func checkValue(r *reader, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if r.isNil() {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return checkStruct(r, t)
	case reflect.Slice, reflect.Array:
		if !holdsInt(t.Elem()) {
			return r.skip()
		}
		n, err := r.arrayLen()
		if err != nil {
			return err
		}
		for i := range n {
			if err := checkValue(r, t.Elem()); err != nil {
				return within("["+strconv.Itoa(i)+"]", err)
			}
		}
		return nil
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		v, _, big, err := r.integer()
		if err == nil && !big && v < 0 {
			err = &rangeError{val: strconv.FormatInt(v, 10), want: "uint64 [0, 18446744073709551615]"}
		}
		return err
	}
	if lo, hi, ok := intBounds(t); ok {
		_, err := r.int(lo, hi)
		return err
	}
	return r.skip()
}

func checkStruct(r *reader, t reflect.Type) error {
	fields := intFieldsOf(t)
	if len(fields) == 0 {
		return r.skip()
	}
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	for range n {
		key, err := r.rawStr()
		if err != nil {
			return err
		}
		ft, ok := fields[string(key)]
		if !ok {
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		if err := checkValue(r, ft); err != nil {
			return within(string(key), err)
		}
	}
	return nil
}

// intBounds is the range of an integer kind.
func intBounds(t reflect.Type) (lo, hi int64, ok bool) {
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int, reflect.Int64:
		bits := t.Bits()
		return -1 << (bits - 1), 1<<(bits-1) - 1, true
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return 0, 1<<t.Bits() - 1, true
	}
	return 0, 0, false
}

// holdsInt reports whether a value of type t has an integer anywhere in it
// that checkValue looks at (struct fields, slice and array elements).
func holdsInt(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return len(intFieldsOf(t)) > 0
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() != reflect.Uint8 && holdsInt(t.Elem())
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return true
	}
	_, _, ok := intBounds(t)
	return ok
}

// intFields maps the msgpack keys of a struct's fields that are or hold
// integers to their types, computed once per type.
var intFields sync.Map // reflect.Type -> map[string]reflect.Type

// intFieldsOf returns the msgpack key -> type map of t's fields that hold
// integers, named as msgpack v5 names them for the tags this package uses:
// the tag's name or the Go name, "-" left out, and an embedded struct's
// fields inlined (and reachable under the embedded field's own name too, as
// msgpack allows). TestIntRangeChecked holds the result to what msgpack
// encodes for every request and response type.
func intFieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := intFields.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct && !strings.Contains(opts, "noinline") {
			for k, ft := range intFieldsOf(f.Type) {
				if _, shadowed := m[k]; !shadowed {
					m[k] = ft
				}
			}
		}
		if holdsInt(f.Type) {
			m[name] = f.Type
		}
	}
	intFields.Store(t, m)
	return m
}
