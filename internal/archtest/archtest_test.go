package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/wharfmq/wharf"

// Third-party import paths (a path and its subpackages match).
const (
	msgpack    = "github.com/vmihailenco/msgpack/v5"
	xsys       = "golang.org/x/sys"
	protoactor = "github.com/asynkron/protoactor-go"
	raft       = "go.etcd.io/raft/v3"
	gnet       = "github.com/panjf2000/gnet/v2"
	hdrhist    = "github.com/HdrHistogram/hdrhistogram-go"
	promclient = "github.com/prometheus/client_golang"
)

// std stands for the standard library in an allowlist.
const std = "std"

func mod(p string) string { return module + "/" + p }

// layer is the import allowlist of one folder. A folder may always import
// its own subpackages.
type layer struct {
	imports []string // std, module paths (mod) and third-party paths
	tests   []string // allowed in its _test.go files on top of imports
	any     bool     // cmd/: anything at all
}

// layers is DESIGN.md's layout table. A file belongs to the longest key that
// is its folder or a parent of it; a folder with no key fails the test, so a
// new folder or a new dependency is added here on purpose.
var layers = map[string]layer{
	"protocol": {imports: []string{std, msgpack}},
	// RocketMQ's remoting frame and headers: bytes and codes only, no
	// msgpack and no Wharf types (netio maps them to Wharf's requests).
	"protocol/remoting": {imports: []string{std}},
	"storage":           {imports: []string{std, xsys, mod("protocol")}},
	"rebalance":         {imports: []string{std, mod("protocol")}},
	"actors": {imports: []string{std, mod("protocol"), mod("storage"), mod("rebalance"),
		protoactor, raft, mod("internal/invariant")},
		// The actors' tests run the broker on virtual time.
		tests: []string{mod("internal/vtime"), mod("internal/testwait")}},
	// The controller's consensus: raft over the FS seam, a plain core.
	"actors/raftnode": {imports: []string{std, raft, mod("storage/vfs"), mod("internal/invariant")}},
	// The name server's route table: a leaf core over the wire types.
	"actors/namesrv": {imports: []string{std, mod("protocol")}},
	// A broker's registration with its name servers: a leaf core too.
	"actors/register": {imports: []string{std, mod("protocol")}},
	// Client-coordinated groups (RocketMQ's clients) and queue locks: a leaf core.
	"actors/clientgroups": {imports: []string{std, mod("protocol")}},
	// A broker's side of controller mode (role, lease, SyncStateSet):
	// a leaf core with its own small types; the shell maps the wire's.
	"actors/ctlagent": {imports: []string{std}},
	// The controller's replicated state machine and leader-side request
	// core: plain logic, no raft (actors/raftnode holds that) and no actors.
	"actors/controller": {imports: []string{std, mod("protocol"), mod("internal/invariant")}},
	// A deviation from DESIGN.md's table (protocol, actors, gnet): netio also
	// imports storage, because a pull's records reach the connection as read
	// from the log and the Wharf codec (netio/codec.go) decodes them with
	// storage.DecodeRecord, the one owner of the record layout; and x/sys,
	// for the direct socket write of netio/conn.go.
	"netio": {imports: []string{std, mod("protocol"), mod("actors"), mod("storage"), gnet, xsys},
		// The remoting listener's tests speak raw frames to a real broker.
		tests: []string{mod("internal/testwait"), mod("internal/brokertest")}},
	// The client's tests run against a real broker in-process.
	"client": {imports: []string{std, mod("protocol"), mod("rebalance")},
		tests: []string{mod("internal/brokertest"), mod("internal/testwait")}},
	// The producer's send decisions as a plain core, a leaf the simulator
	// drives too.
	"client/sendpath": {imports: []string{std, mod("protocol")}},
	// Everything but cmd, listed so that a new folder is a decision here too.
	"sim": {imports: []string{std, mod("protocol"), mod("storage"), mod("rebalance"), mod("actors"),
		mod("netio"), mod("client"), mod("internal"), protoactor, raft, hdrhist}},
	"cmd":                {any: true},
	"internal/invariant": {imports: []string{std}},
	"internal/vtime":     {imports: []string{std}},
	"internal/testwait":  {imports: []string{std}},
	// A real broker in-process for tests of the client (and of anything
	// that needs one): the actors over storage and a loopback listener.
	"internal/brokertest": {imports: []string{std, mod("protocol"), mod("storage"), mod("actors"),
		mod("netio"), mod("internal")}},
	"internal/archtest": {imports: []string{std}},
	// The Jepsen-style history and checker, and the fault-injecting TCP
	// proxy the tests of real processes put between nodes.
	"internal/jepsen":   {imports: []string{std}},
	"internal/faultnet": {imports: []string{std}, tests: []string{mod("internal/testwait")}},
	// The daemons' Prometheus side of the actors' Metrics seam.
	"internal/metrics": {imports: []string{std, mod("actors"), mod("protocol"), promclient}},
	// The web dashboard: the cluster seen through the client's Admin.
	"internal/dashboard": {imports: []string{std, mod("client"), mod("protocol")},
		tests: []string{mod("internal/brokertest"), mod("internal/testwait")}},
	// The bench harness drives a broker binary through the client library.
	"internal/benchrun": {imports: []string{std, mod("client"), mod("protocol"), mod("internal/benchreport"), hdrhist},
		tests: []string{mod("internal/brokertest")}},
	// The bench's HTML/SVG report: plain data in, bytes out.
	"internal/benchreport": {imports: []string{std}},
}

// TestImports holds the import allowlist and that nothing outside cmd/
// imports cmd/.
func TestImports(t *testing.T) {
	report(t, checkImports(tree(t), layers))
}

// TestSeams holds the seams in actors/ and storage/ outside tests.
func TestSeams(t *testing.T) {
	report(t, checkSeams(tree(t), seamExceptions))
}

// TestFuncLength holds the function-length budget.
func TestFuncLength(t *testing.T) {
	report(t, checkFuncLength(tree(t), maxFuncLines, funcDebt))
}

// seamExceptions are the files allowed one banned thing, keyed
// "file: thing" as the finding names it.
var seamExceptions = map[string]string{
	// The FS seam's production implementation: real files and mmap have to
	// reach the OS somewhere, and vfs.FS keeps it in this one file.
	`storage/vfs/os.go: import "os"`:                    "the FS seam's production implementation",
	`storage/vfs/os.go: import "golang.org/x/sys/unix"`: "the FS seam's production implementation (mmap, msync, fallocate)",
	// Latency's nil default; only tests on a real FS use it, the simulator
	// passes its virtual clock's sleep, and no production path builds one.
	`storage/vfs/faulty.go: time.Sleep`: "Latency(d, nil) sleeps on the wall clock, for tests on the OS FS",
}

// maxFuncLines is the budget, counted as /work/shared/tools/funclen does:
// from the func keyword to the closing brace, both included.
const maxFuncLines = 80

// funcDebt is the DEBT LIST: functions over the budget today, keyed
// "folder:Func" (a method as "(*T).M"). It only shrinks: an entry whose
// function is back under the budget (or gone) fails the test until deleted.
var funcDebt = map[string]string{}

// ---- the checks on a tree that breaks every rule ----

// TestChecksCatchViolations runs each check on testdata/bad, whose lines
// that break a rule say so with a comment "// want CHECK: text". Each check
// must report exactly those lines, each with its text, and the stale
// exceptions given; a check that stops catching anything fails here.
func TestChecksCatchViolations(t *testing.T) {
	files, err := parseTree(filepath.Join("testdata", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if under(f.dir, "bench") || under(f.dir, ".hidden") || strings.Contains(f.rel, "testdata/") {
			t.Errorf("%s parsed: nested modules, hidden folders and testdata are skipped", f.rel)
		}
	}
	// actors' tests get one extra import that actors' code does not.
	self := maps.Clone(layers)
	a := self["actors"]
	a.tests = append(slices.Clip(a.tests), "github.com/google/go-cmp")
	self["actors"] = a
	excused := map[string]string{
		`storage/vfs/os.go: import "os"`:                    "the FS seam",
		`storage/vfs/os.go: import "golang.org/x/sys/unix"`: "the FS seam",
		`storage/vfs/mem.go: time.Now`:                      "excuses nothing",
	}
	debt := map[string]string{"storage:(*Log).owed": "in debt", "storage:gone": "excuses nothing"}
	for _, c := range []struct {
		check string
		got   []string
		stale []string
	}{
		{"imports", checkImports(files, self), nil},
		{"seams", checkSeams(files, excused), []string{`seamExceptions["storage/vfs/mem.go: time.Now"]: stale exception`}},
		{"funclen", checkFuncLength(files, maxFuncLines, debt), []string{`funcDebt["storage:gone"]: stale exception`}},
	} {
		t.Run(c.check, func(t *testing.T) { matchWants(t, files, c.check, c.got, c.stale) })
	}
}

var wantComment = regexp.MustCompile(`^// want (\w+): (.+)$`)

// matchWants checks that got holds one finding per want comment of check
// (on its line, containing its text), one per prefix of stale, and nothing
// else.
func matchWants(t *testing.T, files []*srcFile, check string, got, stale []string) {
	t.Helper()
	wants := map[string]string{} // "file:line" -> text
	for _, f := range files {
		for _, cg := range f.ast.Comments {
			for _, c := range cg.List {
				if m := wantComment.FindStringSubmatch(c.Text); m != nil && m[1] == check {
					wants[f.at(c.Pos())] = m[2]
				}
			}
		}
	}
	if len(wants)+len(stale) == 0 {
		t.Fatalf("no want comments for %s in testdata/bad: the self-test tests nothing", check)
	}
	stale = slices.Clone(stale)
	for _, g := range got {
		if i := slices.IndexFunc(stale, func(s string) bool { return strings.HasPrefix(g, s) }); i >= 0 {
			stale = slices.Delete(stale, i, i+1)
			continue
		}
		at, rule, _ := strings.Cut(g, ": ")
		if want, ok := wants[at]; ok && strings.Contains(rule, want) {
			delete(wants, at)
			continue
		}
		t.Errorf("unexpected finding: %s", g)
	}
	for at, want := range wants {
		t.Errorf("%s: no finding, want one containing %q", at, want)
	}
	for _, s := range stale {
		t.Errorf("no finding %s...", s)
	}
}

// ---- the checks ----

// checkImports returns a finding per import outside its folder's allowlist,
// per import of cmd/ from outside cmd/, and per file in a folder with no
// layer.
func checkImports(files []*srcFile, layers map[string]layer) []string {
	var out []string
	for _, f := range files {
		key, ok := layerOf(f.dir, layers)
		if !ok {
			out = append(out, fmt.Sprintf("%s: no import rule for folder %s/: add it to layers", f.at(f.ast.Package), f.dir))
			continue
		}
		l := layers[key]
		for _, imp := range f.ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case under(p, mod("cmd")) && !under(f.dir, "cmd"):
				out = append(out, fmt.Sprintf("%s: imports %s: nothing outside cmd/ imports cmd/", f.at(imp.Pos()), p))
			case l.any, under(p, mod(key)), allowed(p, l.imports), f.test && allowed(p, l.tests):
			default:
				out = append(out, fmt.Sprintf("%s: imports %s: not in the allowlist of %s/ (DESIGN.md layout)", f.at(imp.Pos()), p, key))
			}
		}
	}
	return out
}

// layerOf returns the longest key of layers that is dir or a parent of it.
func layerOf(dir string, layers map[string]layer) (string, bool) {
	best := ""
	for k := range layers {
		if under(dir, k) && len(k) > len(best) {
			best = k
		}
	}
	return best, best != ""
}

func allowed(p string, list []string) bool {
	for _, a := range list {
		if a == std && isStd(p) || under(p, a) {
			return true
		}
	}
	return false
}

// isStd reports a standard-library path: its first element has no dot.
func isStd(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// under reports whether slash path p is base or below it.
func under(p, base string) bool {
	return p == base || strings.HasPrefix(p, base+"/")
}

// seamFolders are where the seams are enforced.
var seamFolders = []string{"actors", "storage"}

// bannedTime are package time's functions that read or wait on the wall
// clock. Durations, time.Time values and their methods are fine: time is an
// input there.
var bannedTime = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "AfterFunc": true, "NewTimer": true,
	"NewTicker": true, "Since": true, "Until": true, "Tick": true,
}

// bannedImports reach files, processes or sockets. net/netip and io/fs are
// values only and stay allowed.
var bannedImports = map[string]bool{
	"os": true, "os/exec": true, "os/signal": true, "net": true, "net/http": true,
	"syscall": true, "golang.org/x/sys/unix": true,
}

const (
	ruleTime   = "time is an input in actors/ and storage/: read it through the Clock seam (kit.now, kit.after)"
	ruleGo     = "actors/ and storage/ start no goroutines: blocking work runs through Env.RunIO (kit.io)"
	ruleImport = "actors/ and storage/ reach disks and sockets only through the seams (vfs.FS, Transport)"
	ruleFuture = "an actor never blocks on another's reply (nor times out on the wall clock): send and answer with messages"
)

// checkSeams returns a finding per banned thing in the non-test files of
// seamFolders, less those excused, plus one per exception that excused
// nothing.
func checkSeams(files []*srcFile, excused map[string]string) []string {
	var out []string
	used := map[string]bool{}
	emit := func(f *srcFile, pos token.Pos, thing, rule string) {
		if key := f.rel + ": " + thing; excused[key] != "" {
			used[key] = true
			return
		}
		out = append(out, fmt.Sprintf("%s: %s: %s", f.at(pos), thing, rule))
	}
	for _, f := range files {
		if f.test || !slices.ContainsFunc(seamFolders, func(s string) bool { return under(f.dir, s) }) {
			continue
		}
		timeNames := map[string]bool{} // local names of package time in f
		for _, imp := range f.ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if bannedImports[p] {
				emit(f, imp.Pos(), "import "+strconv.Quote(p), ruleImport)
			}
			if p == "time" {
				switch {
				case imp.Name == nil:
					timeNames["time"] = true
				case imp.Name.Name == ".":
					emit(f, imp.Pos(), `import . "time"`, "a dot import hides clock reads from this check")
				case imp.Name.Name != "_":
					timeNames[imp.Name.Name] = true
				}
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				emit(f, n.Pos(), "go statement", ruleGo)
			case *ast.SelectorExpr:
				// A use, not only a call: `sleep := time.Sleep` waits the same.
				// Obj == nil: the name is not a local that shadows the import.
				if x, ok := n.X.(*ast.Ident); ok && x.Obj == nil && timeNames[x.Name] && bannedTime[n.Sel.Name] {
					emit(f, n.Pos(), "time."+n.Sel.Name, ruleTime)
				}
				if n.Sel.Name == "RequestFuture" {
					emit(f, n.Pos(), "RequestFuture", ruleFuture)
				}
			}
			return true
		})
	}
	return append(out, stale(excused, used, "seamExceptions")...)
}

// checkFuncLength returns a finding per function of a non-test file longer
// than max lines and not in debt, plus one per debt entry that excused
// nothing.
func checkFuncLength(files []*srcFile, max int, debt map[string]string) []string {
	var out []string
	used := map[string]bool{}
	for _, f := range files {
		if f.test {
			continue
		}
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := f.fset.Position(fd.End()).Line - f.fset.Position(fd.Pos()).Line + 1
			if n <= max {
				continue
			}
			key := f.dir + ":" + funcName(fd)
			if debt[key] != "" {
				used[key] = true
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s is %d lines, over the budget of %d (split it; funcDebt only shrinks)", f.at(fd.Pos()), funcName(fd), n, max))
		}
	}
	return append(out, stale(debt, used, "funcDebt")...)
}

// funcName names fd as funclen does: "F", or "(*T).M" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	var recv func(ast.Expr) string
	recv = func(e ast.Expr) string {
		switch t := e.(type) {
		case *ast.StarExpr:
			return "*" + recv(t.X)
		case *ast.Ident:
			return t.Name
		case *ast.IndexExpr:
			return recv(t.X)
		case *ast.IndexListExpr:
			return recv(t.X)
		}
		return "?"
	}
	return "(" + recv(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}

// stale returns a finding per exception that excused nothing.
func stale(exceptions map[string]string, used map[string]bool, list string) []string {
	var out []string
	for k := range exceptions {
		if !used[k] {
			out = append(out, fmt.Sprintf("%s[%q]: stale exception, nothing needs it any more: delete it", list, k))
		}
	}
	slices.Sort(out)
	return out
}

// ---- the source tree ----

// srcFile is one parsed Go file.
type srcFile struct {
	rel  string // slash path from the tree's root
	dir  string // its folder, slash path from the root
	test bool   // a _test.go file
	fset *token.FileSet
	ast  *ast.File
}

// at formats pos as "file:line".
func (f *srcFile) at(pos token.Pos) string {
	return fmt.Sprintf("%s:%d", f.rel, f.fset.Position(pos).Line)
}

// parseTree parses every Go file below root, skipping hidden folders,
// testdata and nested modules (bench/ has its own go.mod).
func parseTree(root string) ([]*srcFile, error) {
	var files []*srcFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name := d.Name(); strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		af, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("parse: %w", err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("relative path of %s: %w", path, err)
		}
		rel = filepath.ToSlash(rel)
		files = append(files, &srcFile{rel: rel, dir: pathDir(rel), test: strings.HasSuffix(rel, "_test.go"), fset: fset, ast: af})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	return files, nil
}

func pathDir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

var (
	treeOnce  sync.Once
	treeFiles []*srcFile
	treeErr   error
)

// tree returns the module's files, parsed once for all tests.
func tree(t *testing.T) []*srcFile {
	t.Helper()
	treeOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			treeErr = err
			return
		}
		treeFiles, treeErr = parseTree(root)
	})
	if treeErr != nil {
		t.Fatal(treeErr)
	}
	// A walk that finds nothing passes every check: make sure it did not.
	for _, top := range []string{"protocol", "storage", "actors", "netio", "client", "sim", "cmd"} {
		if !slices.ContainsFunc(treeFiles, func(f *srcFile) bool { return under(f.dir, top) && !f.test }) {
			t.Fatalf("no Go file found under %s/: the walk is broken", top)
		}
	}
	return treeFiles
}

// moduleRoot finds the folder of the module's go.mod above the working
// directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && regexp.MustCompile(`(?m)^module `+regexp.QuoteMeta(module)+`\s*$`).Match(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", module)
		}
		dir = parent
	}
}

// report fails t with one line per finding.
func report(t *testing.T, findings []string) {
	t.Helper()
	for _, f := range findings {
		t.Error(f)
	}
}
