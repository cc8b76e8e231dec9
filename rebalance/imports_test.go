package rebalance

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRebalanceImportsAreLeaf holds the package's place in DESIGN.md: the client
// will import it, so it imports only the standard library and protocol.
func TestRebalanceImportsAreLeaf(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files (%v)", err)
	}
	for _, f := range files {
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.Split(p, "/")[0], ".")
			if !std && p != "github.com/wharfmq/wharf/protocol" {
				t.Errorf("%s imports %s: rebalance imports only std and protocol", f, p)
			}
		}
	}
}
