// Conformance tests: the basic semantics every FS implementation shares,
// run against the OS FS, the in-memory FS, and the in-memory FS behind a
// Faulty wrapper that injects nothing.

package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"testing"
)

// fsCase builds a fresh FS and a root directory in it to work under.
type fsCase struct {
	name string
	new  func(t *testing.T) (FS, string)
}

var fsCases = []fsCase{
	{"os", func(t *testing.T) (FS, string) { return NewOS(), t.TempDir() }},
	{"mem", func(t *testing.T) (FS, string) { return NewMem(), "/data" }},
	{"faulty-mem", func(t *testing.T) (FS, string) { return NewFaulty(NewMem(), &Counter{}), "/data" }},
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, fsys FS, root string)
	}{
		{"CreateIsZeroFilled", testCreateZero},
		{"CreateExisting", testCreateExisting},
		{"Missing", testMissing},
		{"WriteReadRoundTrip", testWriteRead},
		{"MapSharesWrites", testMap},
		{"MappedFileCannotChangeSize", testMappedSize},
		{"Truncate", testTruncate},
		{"ListSorted", testList},
		{"RenameRemove", testRenameRemove},
		{"MkdirAllStatSyncDir", testDirs},
		{"Usage", testUsage},
		{"Closed", testClosed},
		{"Reopen", testReopen},
	}
	for _, c := range fsCases {
		for _, tc := range tests {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				fsys, root := c.new(t)
				must(t, fsys.MkdirAll(root))
				tc.run(t, fsys, root)
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, fsys FS, name string, size int64) File {
	t.Helper()
	f, err := fsys.Create(name, size)
	must(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func readAll(t *testing.T, f File) []byte {
	t.Helper()
	b := make([]byte, f.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func testCreateZero(t *testing.T, fsys FS, root string) {
	for _, size := range []int64{0, 1, PageSize, 3*PageSize + 7} {
		name := path.Join(root, fmt.Sprintf("zero-%d", size))
		f := create(t, fsys, name, size)
		if f.Size() != size {
			t.Fatalf("size %d, want %d", f.Size(), size)
		}
		if f.Name() != name {
			t.Fatalf("name %q, want %q", f.Name(), name)
		}
		if b := readAll(t, f); !bytes.Equal(b, make([]byte, size)) {
			t.Fatalf("new file of %d bytes not zero-filled", size)
		}
		st, err := fsys.Stat(name)
		must(t, err)
		if st.Size != size || st.IsDir || st.Name != path.Base(name) {
			t.Fatalf("stat %+v", st)
		}
	}
}

func testCreateExisting(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "a")
	create(t, fsys, name, 10)
	if _, err := fsys.Create(name, 10); !errors.Is(err, ErrExist) {
		t.Fatalf("create existing: %v, want ErrExist", err)
	}
	if _, err := fsys.Create(path.Join(root, "nodir", "a"), 10); !errors.Is(err, ErrNotExist) {
		t.Fatalf("create in missing dir: %v, want ErrNotExist", err)
	}
}

func testMissing(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "missing")
	if _, err := fsys.Open(name); !errors.Is(err, ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open: %v", err)
	}
	if _, err := fsys.Stat(name); !errors.Is(err, ErrNotExist) {
		t.Errorf("stat: %v", err)
	}
	if err := fsys.Remove(name); !errors.Is(err, ErrNotExist) {
		t.Errorf("remove: %v", err)
	}
	if err := fsys.RemoveAll(name); err != nil {
		t.Errorf("remove all of missing: %v", err)
	}
	if _, err := fsys.List(name); !errors.Is(err, ErrNotExist) {
		t.Errorf("list: %v", err)
	}
	if err := fsys.Rename(name, name+"2"); !errors.Is(err, ErrNotExist) {
		t.Errorf("rename: %v", err)
	}
}

func testWriteRead(t *testing.T, fsys FS, root string) {
	f := create(t, fsys, path.Join(root, "a"), 100)
	if n, err := f.WriteAt([]byte("hello"), 10); n != 5 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	got := make([]byte, 5)
	if n, err := f.ReadAt(got, 10); n != 5 || err != nil || string(got) != "hello" {
		t.Fatalf("read: %d %v %q", n, err, got)
	}
	// Short read at the end is io.EOF, unwrapped.
	got = make([]byte, 10)
	if n, err := f.ReadAt(got, 95); n != 5 || err != io.EOF {
		t.Fatalf("short read: %d %v", n, err)
	}
	// Growing write.
	if _, err := f.WriteAt([]byte("tail"), 200); err != nil {
		t.Fatal(err)
	}
	if f.Size() != 204 {
		t.Fatalf("size after growing write %d", f.Size())
	}
	b := readAll(t, f)
	if !bytes.Equal(b[100:200], make([]byte, 100)) || string(b[200:]) != "tail" {
		t.Fatalf("gap not zero or tail wrong")
	}
	must(t, f.SyncRange(0, 204))
	must(t, f.Sync())
}

func testMap(t *testing.T, fsys FS, root string) {
	f := create(t, fsys, path.Join(root, "a"), 2*PageSize)
	m, err := f.Map()
	must(t, err)
	if len(m) != 2*PageSize {
		t.Fatalf("map len %d", len(m))
	}
	m2, err := f.Map()
	must(t, err)
	if &m2[0] != &m[0] || len(m2) != len(m) {
		t.Fatal("second Map returned a different slice")
	}
	copy(m[PageSize-2:], "xyzw") // straddles a page boundary
	got := make([]byte, 4)
	_, err = f.ReadAt(got, PageSize-2)
	must(t, err)
	if string(got) != "xyzw" {
		t.Fatalf("ReadAt after mapped write: %q", got)
	}
	_, err = f.WriteAt([]byte("ab"), 5)
	must(t, err)
	if string(m[5:7]) != "ab" {
		t.Fatalf("mapping after WriteAt: %q", m[5:7])
	}
	must(t, f.SyncRange(PageSize-2, 4))
	must(t, f.SyncRange(5, 0))
	must(t, f.Sync())
	Prefault(m) // must not change content
	if string(m[PageSize-2:PageSize+2]) != "xyzw" || string(m[5:7]) != "ab" {
		t.Fatal("Prefault changed content")
	}
	must(t, Advise(f, AdviseSequential))
	must(t, f.Unmap())
	must(t, f.Unmap()) // idempotent

	// An empty file maps to an empty slice.
	e := create(t, fsys, path.Join(root, "empty"), 0)
	em, err := e.Map()
	must(t, err)
	if len(em) != 0 {
		t.Fatalf("empty map len %d", len(em))
	}
}

func testMappedSize(t *testing.T, fsys FS, root string) {
	f := create(t, fsys, path.Join(root, "a"), PageSize)
	_, err := f.Map()
	must(t, err)
	if err := f.Truncate(10); err == nil {
		t.Fatal("truncate of a mapped file succeeded")
	}
	if _, err := f.WriteAt([]byte("x"), PageSize); err == nil {
		t.Fatal("growing write to a mapped file succeeded")
	}
	if f.Size() != PageSize {
		t.Fatalf("size changed to %d", f.Size())
	}
	must(t, f.Unmap())
	must(t, f.Truncate(10))
	if f.Size() != 10 {
		t.Fatalf("size %d after truncate", f.Size())
	}
}

func testTruncate(t *testing.T, fsys FS, root string) {
	f := create(t, fsys, path.Join(root, "a"), 10)
	_, err := f.WriteAt([]byte("0123456789"), 0)
	must(t, err)
	must(t, f.Truncate(4))
	must(t, f.Truncate(8)) // regrows with zeros, not old bytes
	if b := readAll(t, f); string(b) != "0123\x00\x00\x00\x00" {
		t.Fatalf("after truncate: %q", b)
	}
	must(t, f.Sync())
}

func testList(t *testing.T, fsys FS, root string) {
	for _, n := range []string{"c", "a", "b10", "b2"} {
		create(t, fsys, path.Join(root, n), 1)
	}
	must(t, fsys.MkdirAll(path.Join(root, "d", "e")))
	names, err := fsys.List(root)
	must(t, err)
	if want := []string{"a", "b10", "b2", "c", "d"}; !slices.Equal(names, want) {
		t.Fatalf("list %v, want %v", names, want)
	}
	if _, err := fsys.List(path.Join(root, "a")); err == nil {
		t.Fatal("list of a file succeeded")
	}
}

func testRenameRemove(t *testing.T, fsys FS, root string) {
	a, b := path.Join(root, "a"), path.Join(root, "b")
	fa := create(t, fsys, a, 3)
	_, err := fa.WriteAt([]byte("AAA"), 0)
	must(t, err)
	create(t, fsys, b, 5)
	must(t, fsys.Rename(a, b)) // replaces b
	if _, err := fsys.Stat(a); !errors.Is(err, ErrNotExist) {
		t.Fatalf("old name still there: %v", err)
	}
	g, err := fsys.Open(b)
	must(t, err)
	defer g.Close()
	if got := readAll(t, g); string(got) != "AAA" {
		t.Fatalf("renamed content %q", got)
	}
	must(t, fsys.SyncDir(root))
	must(t, fsys.Remove(b))
	must(t, fsys.SyncDir(root))
	names, err := fsys.List(root)
	must(t, err)
	if len(names) != 0 {
		t.Fatalf("left: %v", names)
	}
	// RemoveAll of a tree.
	must(t, fsys.MkdirAll(path.Join(root, "x", "y")))
	create(t, fsys, path.Join(root, "x", "y", "f"), 1)
	if err := fsys.Remove(path.Join(root, "x")); err == nil {
		t.Fatal("remove of a non-empty directory succeeded")
	}
	must(t, fsys.RemoveAll(path.Join(root, "x")))
	if _, err := fsys.Stat(path.Join(root, "x")); !errors.Is(err, ErrNotExist) {
		t.Fatalf("after RemoveAll: %v", err)
	}
}

func testDirs(t *testing.T, fsys FS, root string) {
	d := path.Join(root, "a", "b", "c")
	must(t, fsys.MkdirAll(d))
	must(t, fsys.MkdirAll(d)) // existing is fine
	st, err := fsys.Stat(path.Join(root, "a", "b"))
	must(t, err)
	if !st.IsDir || st.Name != "b" {
		t.Fatalf("stat dir %+v", st)
	}
	must(t, fsys.SyncDir(d))
	if err := fsys.SyncDir(path.Join(root, "nope")); !errors.Is(err, ErrNotExist) {
		t.Fatalf("sync of missing dir: %v", err)
	}
	create(t, fsys, path.Join(root, "file"), 1)
	if err := fsys.MkdirAll(path.Join(root, "file", "sub")); err == nil {
		t.Fatal("MkdirAll through a file succeeded")
	}
	// Remove takes an empty directory only.
	if err := fsys.Remove(path.Join(root, "a", "b")); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("remove of a directory with entries: %v, want ErrNotEmpty", err)
	}
	must(t, fsys.Remove(d))
	must(t, fsys.Remove(path.Join(root, "a", "b")))
	if _, err := fsys.Stat(path.Join(root, "a", "b")); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat of a removed directory: %v", err)
	}
}

func testUsage(t *testing.T, fsys FS, root string) {
	u, err := fsys.Usage(root)
	must(t, err)
	if u.Total == 0 || u.Free > u.Total {
		t.Fatalf("usage %+v", u)
	}
	if r := u.UsedRatio(); r < 0 || r > 1 {
		t.Fatalf("used ratio %v", r)
	}
}

func testClosed(t *testing.T, fsys FS, root string) {
	f, err := fsys.Create(path.Join(root, "a"), 10)
	must(t, err)
	_, err = f.Map()
	must(t, err)
	must(t, f.Close())
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("write after close succeeded")
	}
	if err := f.Sync(); err == nil {
		t.Fatal("sync after close succeeded")
	}
}

func testReopen(t *testing.T, fsys FS, root string) {
	name := path.Join(root, "seg")
	f, err := fsys.Create(name, 3*PageSize)
	must(t, err)
	m, err := f.Map()
	must(t, err)
	want := bytes.Repeat([]byte("wharf!"), 1000)
	copy(m[100:], want)
	must(t, f.SyncRange(100, int64(len(want))))
	must(t, f.Sync())
	must(t, f.Close())
	must(t, fsys.SyncDir(root))

	g, err := fsys.Open(name)
	must(t, err)
	defer g.Close()
	if g.Size() != 3*PageSize {
		t.Fatalf("reopened size %d", g.Size())
	}
	m2, err := g.Map()
	must(t, err)
	if !bytes.Equal(m2[100:100+len(want)], want) {
		t.Fatal("reopened mapping lost data")
	}
}
