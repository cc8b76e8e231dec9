// Tests of the crashable in-memory FS: what survives Crash, determinism,
// capacity, clock.

package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// crashRead returns the content of name in m, or nil and false if absent.
func crashRead(t *testing.T, m *Mem, name string) ([]byte, bool) {
	t.Helper()
	f, err := m.Open(name)
	if errors.Is(err, ErrNotExist) {
		return nil, false
	}
	must(t, err)
	defer f.Close()
	return readAll(t, f), true
}

// newSynced makes /d/name of size bytes whose zero content and entry are
// durable.
func newSynced(t *testing.T, m *Mem, name string, size int64) File {
	t.Helper()
	must(t, m.MkdirAll("/d"))
	f, err := m.Create("/d/"+name, size)
	must(t, err)
	must(t, f.Sync())
	must(t, m.SyncDir("/d"))
	return f
}

func TestMemCrashDurability(t *testing.T) {
	page := func(c byte) []byte { return bytes.Repeat([]byte{c}, PageSize) }
	tests := []struct {
		name string
		// setup acts on a fresh Mem; want is /d/f's content after a crash
		// with zero CrashOptions (nil: the file must be gone).
		setup func(t *testing.T, m *Mem)
		want  []byte
	}{
		{
			name: "unsynced write lost",
			setup: func(t *testing.T, m *Mem) {
				f := newSynced(t, m, "f", PageSize)
				_, err := f.WriteAt(page('a'), 0)
				must(t, err)
			},
			want: make([]byte, PageSize),
		},
		{
			name: "synced write kept",
			setup: func(t *testing.T, m *Mem) {
				f := newSynced(t, m, "f", PageSize)
				_, err := f.WriteAt(page('a'), 0)
				must(t, err)
				must(t, f.Sync())
			},
			want: page('a'),
		},
		{
			name: "SyncRange rounds out to pages and keeps only them",
			setup: func(t *testing.T, m *Mem) {
				f := newSynced(t, m, "f", 3*PageSize)
				_, err := f.WriteAt(slices.Concat(page('a'), page('b'), page('c')), 0)
				must(t, err)
				must(t, f.SyncRange(PageSize+10, 1))
			},
			want: slices.Concat(make([]byte, PageSize), page('b'), make([]byte, PageSize)),
		},
		{
			name: "writes through Map are tracked like WriteAt",
			setup: func(t *testing.T, m *Mem) {
				f := newSynced(t, m, "f", 2*PageSize)
				b, err := f.Map()
				must(t, err)
				copy(b, page('a'))
				copy(b[PageSize:], page('b'))
				must(t, f.SyncRange(0, PageSize))
			},
			want: slices.Concat(page('a'), make([]byte, PageSize)),
		},
		{
			name: "new file without SyncDir vanishes",
			setup: func(t *testing.T, m *Mem) {
				must(t, m.MkdirAll("/d"))
				f, err := m.Create("/d/f", 10)
				must(t, err)
				must(t, f.Sync())
			},
			want: nil,
		},
		{
			name: "new file with SyncDir survives at its created size",
			setup: func(t *testing.T, m *Mem) {
				must(t, m.MkdirAll("/d"))
				_, err := m.Create("/d/f", 10)
				must(t, err)
				must(t, m.SyncDir("/d"))
			},
			want: make([]byte, 10),
		},
		{
			name: "remove without SyncDir is undone",
			setup: func(t *testing.T, m *Mem) {
				f := newSynced(t, m, "f", 4)
				_, err := f.WriteAt([]byte("abcd"), 0)
				must(t, err)
				must(t, f.Sync())
				must(t, m.Remove("/d/f"))
			},
			want: []byte("abcd"),
		},
		{
			name: "remove with SyncDir is durable",
			setup: func(t *testing.T, m *Mem) {
				newSynced(t, m, "f", 4)
				must(t, m.Remove("/d/f"))
				must(t, m.SyncDir("/d"))
			},
			want: nil,
		},
		{
			name: "unsynced truncate undone, synced truncate kept",
			setup: func(t *testing.T, m *Mem) {
				f := newSynced(t, m, "f", 6)
				_, err := f.WriteAt([]byte("abcdef"), 0)
				must(t, err)
				must(t, f.Sync())
				must(t, f.Truncate(2))
				must(t, f.Sync())
				must(t, f.Truncate(1)) // not synced
			},
			want: []byte("ab"),
		},
		{
			name: "growing write durable only with its sync",
			setup: func(t *testing.T, m *Mem) {
				f := newSynced(t, m, "f", 0)
				_, err := f.WriteAt([]byte("abc"), 0)
				must(t, err)
				must(t, f.SyncRange(0, 3))
				_, err = f.WriteAt([]byte("def"), 3)
				must(t, err)
			},
			want: []byte("abc"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			tc.setup(t, m)
			c := m.Crash(1, CrashOptions{})
			got, ok := crashRead(t, c, "/d/f")
			if tc.want == nil {
				if ok {
					t.Fatalf("file survived the crash with %d bytes", len(got))
				}
				return
			}
			if !ok {
				t.Fatal("file lost in the crash")
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("after crash: %q, want %q", abbrev(got), abbrev(tc.want))
			}
		})
	}
}

func abbrev(b []byte) string {
	if len(b) <= 16 {
		return string(b)
	}
	return fmt.Sprintf("%q...(%d bytes)", b[:16], len(b))
}

func TestMemRenameDurableOnlyAfterSyncDir(t *testing.T) {
	m := NewMem()
	f := newSynced(t, m, "old", 3)
	_, err := f.WriteAt([]byte("xyz"), 0)
	must(t, err)
	must(t, f.Sync())
	must(t, m.Rename("/d/old", "/d/new"))

	c := m.Crash(1, CrashOptions{})
	if _, ok := crashRead(t, c, "/d/new"); ok {
		t.Fatal("unsynced rename survived")
	}
	if got, ok := crashRead(t, c, "/d/old"); !ok || string(got) != "xyz" {
		t.Fatalf("old name after crash: %q %v", got, ok)
	}

	must(t, m.SyncDir("/d"))
	c = m.Crash(1, CrashOptions{})
	if _, ok := crashRead(t, c, "/d/old"); ok {
		t.Fatal("old name survived a synced rename")
	}
	if got, ok := crashRead(t, c, "/d/new"); !ok || string(got) != "xyz" {
		t.Fatalf("new name after crash: %q %v", got, ok)
	}
}

func TestMemMkdirAllDurable(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/a/b/c"))
	c := m.Crash(1, CrashOptions{})
	if st, err := c.Stat("/a/b/c"); err != nil || !st.IsDir {
		t.Fatalf("dir lost: %v", err)
	}
}

// workload writes unsynced data over several files and pages, some synced.
func workload(t *testing.T) *Mem {
	m := NewMem()
	must(t, m.MkdirAll("/d"))
	for i := range 4 {
		f, err := m.Create(fmt.Sprintf("/d/f%d", i), 8*PageSize)
		must(t, err)
		b, err := f.Map()
		must(t, err)
		for p := range 8 {
			for j := range PageSize {
				b[p*PageSize+j] = byte(1 + i*8 + p + j%7)
			}
		}
		must(t, f.SyncRange(0, int64(i)*PageSize))
	}
	must(t, m.SyncDir("/d"))
	return m
}

func image(t *testing.T, m *Mem) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	names, err := m.List("/d")
	must(t, err)
	for _, n := range names {
		b, _ := crashRead(t, m, "/d/"+n)
		out[n] = b
	}
	return out
}

func equalImages(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestMemCrashDeterministic(t *testing.T) {
	opts := CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true}
	a := image(t, workload(t).Crash(42, opts))
	b := image(t, workload(t).Crash(42, opts)) // identical state, same seed
	if !equalImages(a, b) {
		t.Fatal("same seed and state gave different images")
	}
	m := workload(t)
	if !equalImages(a, image(t, m.Crash(42, opts))) || !equalImages(a, image(t, m.Crash(42, opts))) {
		t.Fatal("repeated Crash of one Mem differs")
	}
	differs := false
	for seed := int64(0); seed < 20 && !differs; seed++ {
		differs = !equalImages(a, image(t, m.Crash(seed+100, opts)))
	}
	if !differs {
		t.Fatal("20 seeds all gave the same image: the seed is not used")
	}
}

func TestMemCrashKeepAll(t *testing.T) {
	m := workload(t)
	want := image(t, m)
	got := image(t, m.Crash(7, CrashOptions{UnsyncedKeepRatio: 1}))
	if !equalImages(want, got) {
		t.Fatal("UnsyncedKeepRatio 1 lost written bytes")
	}
	// The crash image is all durable: crashing it again loses nothing.
	c := m.Crash(7, CrashOptions{UnsyncedKeepRatio: 1})
	if !equalImages(want, image(t, c.Crash(8, CrashOptions{}))) {
		t.Fatal("crash image is not durable")
	}
}

func TestMemCrashKeepsSomePages(t *testing.T) {
	m := workload(t)
	c := m.Crash(3, CrashOptions{UnsyncedKeepRatio: 0.5})
	kept, lost := 0, 0
	for n, b := range image(t, c) {
		cur, _ := crashRead(t, m, "/d/"+n)
		for p := 0; p < len(cur); p += PageSize {
			switch {
			case bytes.Equal(b[p:p+PageSize], cur[p:p+PageSize]):
				kept++
			case bytes.Equal(b[p:p+PageSize], make([]byte, PageSize)):
				lost++
			default:
				t.Fatalf("%s page %d is neither durable nor current", n, p/PageSize)
			}
		}
	}
	if kept == 0 || lost == 0 {
		t.Fatalf("ratio 0.5 kept %d and lost %d pages", kept, lost)
	}
}

func TestMemCrashTornLastPage(t *testing.T) {
	m := NewMem()
	f := newSynced(t, m, "f", 3*PageSize)
	old := bytes.Repeat([]byte{'o'}, 3*PageSize)
	_, err := f.WriteAt(old, 0)
	must(t, err)
	must(t, f.Sync())
	cur := bytes.Repeat([]byte{'n'}, 2*PageSize+100) // last differing page: #2
	_, err = f.WriteAt(cur, 0)
	must(t, err)

	sawPartial := false
	for seed := range int64(50) {
		got, ok := crashRead(t, m.Crash(seed, CrashOptions{UnsyncedKeepRatio: 1, TornLastPage: true}), "/d/f")
		if !ok || len(got) != 3*PageSize {
			t.Fatalf("seed %d: file %v, %d bytes", seed, ok, len(got))
		}
		if !bytes.Equal(got[:2*PageSize], cur[:2*PageSize]) {
			t.Fatalf("seed %d: earlier pages torn", seed)
		}
		// Page 2: a prefix of the new bytes, then the old ones.
		last := got[2*PageSize:]
		cut := bytes.IndexByte(last, 'o')
		if cut < 0 {
			cut = len(last)
		}
		if cut > 100 || !bytes.Equal(last[:cut], cur[2*PageSize:2*PageSize+cut]) || !bytes.Equal(last[cut:], old[2*PageSize+cut:]) {
			t.Fatalf("seed %d: last page is not a prefix of the write: cut %d", seed, cut)
		}
		if cut > 0 && cut < 100 {
			sawPartial = true
		}
	}
	if !sawPartial {
		t.Fatal("50 seeds never tore the last page")
	}
}

func TestMemCrashLeavesOriginalUsable(t *testing.T) {
	m := NewMem()
	f := newSynced(t, m, "f", 4)
	_, err := f.WriteAt([]byte("live"), 0)
	must(t, err)
	c := m.Crash(1, CrashOptions{})
	got := make([]byte, 4)
	_, err = f.ReadAt(got, 0)
	must(t, err)
	if string(got) != "live" {
		t.Fatalf("original changed: %q", got)
	}
	// Writes to the crash image do not reach the original.
	g, err := c.Open("/d/f")
	must(t, err)
	_, err = g.WriteAt([]byte("XXXX"), 0)
	must(t, err)
	_, err = f.ReadAt(got, 0)
	must(t, err)
	if string(got) != "live" {
		t.Fatalf("crash image shares bytes with the original: %q", got)
	}
}

func TestMemCapacity(t *testing.T) {
	m := NewMem(WithCapacity(10 * PageSize))
	must(t, m.MkdirAll("/d"))
	f, err := m.Create("/d/a", 6*PageSize)
	must(t, err)
	if _, err := m.Create("/d/b", 5*PageSize); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("create past capacity: %v", err)
	}
	if _, err := m.Stat("/d/b"); !errors.Is(err, ErrNotExist) {
		t.Fatal("failed create left a file")
	}
	if _, err := f.WriteAt([]byte("x"), 10*PageSize); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("growing write past capacity: %v", err)
	}
	u, err := m.Usage("/d")
	must(t, err)
	if u.Total != 10*PageSize || u.Free != 4*PageSize {
		t.Fatalf("usage %+v", u)
	}
	must(t, m.Remove("/d/a")) // frees its space
	if _, err := m.Create("/d/b", 10*PageSize); err != nil {
		t.Fatalf("create after remove: %v", err)
	}
}

func TestMemClock(t *testing.T) {
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	m := NewMem(WithClock(func() time.Time { return now }))
	f, err := m.Create("/a", 1)
	must(t, err)
	now = now.Add(time.Hour)
	_, err = f.WriteAt([]byte("x"), 0)
	must(t, err)
	st, err := m.Stat("/a")
	must(t, err)
	if !st.ModTime.Equal(now) {
		t.Fatalf("mtime %v, want %v", st.ModTime, now)
	}
	st, err = NewMem().Stat("/")
	must(t, err)
	if !st.IsDir {
		t.Fatal("root not a dir")
	}
	d := NewMem()
	_, err = d.Create("/b", 1)
	must(t, err)
	if st, _ := d.Stat("/b"); !st.ModTime.Equal(MemEpoch) {
		t.Fatalf("default mtime %v", st.ModTime)
	}
}

func TestMemMapStableWhileMapped(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/a", PageSize)
	must(t, err)
	b1, err := f.Map()
	must(t, err)
	g, err := m.Open("/a") // a second handle maps the same bytes
	must(t, err)
	b2, err := g.Map()
	must(t, err)
	if &b1[0] != &b2[0] {
		t.Fatal("two handles map different bytes")
	}
	must(t, f.Close())
	if err := g.Truncate(1); err == nil {
		t.Fatal("truncate while another handle maps the file succeeded")
	}
	must(t, g.Unmap())
	must(t, g.Truncate(1))
}

// TestMemConcurrent runs goroutines on different files (run with -race).
func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d"))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("/d/f%d", i)
			f, err := m.Create(name, PageSize)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := f.Map()
			for j := range 100 {
				b[j] = byte(j)
				_ = f.SyncRange(int64(j), 1)
				_, _ = m.List("/d")
				_, _ = m.Usage("/d")
			}
			_ = f.Close()
			_ = m.SyncDir("/d")
		}()
	}
	wg.Wait()
	names, err := m.Crash(1, CrashOptions{}).List("/d")
	must(t, err)
	if len(names) != 8 {
		t.Fatalf("after SyncDir from every goroutine: %v", names)
	}
}
