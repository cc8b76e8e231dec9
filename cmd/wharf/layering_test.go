package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/wharfmq/wharf"

// forbidden lists, per top-level folder, the import path prefixes its Go files
// (tests included) must not use: the layering of DESIGN.md.
var forbidden = map[string][]string{
	"protocol": {module + "/storage", module + "/actors", module + "/netio", module + "/sim", module + "/cmd", module + "/client"},
	"storage":  {module + "/actors", module + "/netio", module + "/sim", module + "/cmd", module + "/client"},
	"actors":   {module + "/netio", module + "/sim", module + "/cmd", module + "/client", "github.com/panjf2000/gnet"},
	"netio":    {module + "/sim", module + "/cmd", module + "/client"},
	"client":   {module + "/storage", module + "/actors", module + "/netio", module + "/sim", module + "/cmd"},
	"sim":      {module + "/cmd"},
	"internal": {module + "/cmd"},
}

// TestLayering holds the import rules of DESIGN.md: storage and protocol
// import no higher layer, actors import no netio, gnet or sim, and nothing
// below cmd imports cmd.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		rules, ok := forbidden[top]
		if !ok {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range rules {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("%s imports %s: %s/ must not import it (DESIGN.md layering)", rel, p, top)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go files checked: the walk is broken")
	}
}
