package util

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

func newWriter(t *testing.T) (*AtomicWriter, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := NewAtomicWriter(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	return w, dir
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteLaysOutDataSymlinkAndTimestampedDir(t *testing.T) {
	w, dir := newWriter(t)
	if err := w.Write(map[string]FileProjection{
		"game.properties": {Data: []byte("lives=3"), Mode: 0o644},
		"ui/colors":       {Data: []byte("blue"), Mode: 0o600},
	}); err != nil {
		t.Fatal(err)
	}
	ts, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatalf("..data is not a symlink: %v", err)
	}
	if !strings.HasPrefix(ts, "..") || ts == "..data" {
		t.Errorf("..data -> %q, want a ..<timestamp> directory", ts)
	}
	for name, want := range map[string]string{"game.properties": "..data/game.properties", "ui": "..data/ui"} {
		got, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", name, got, err, want)
		}
	}
	if got := readFile(t, filepath.Join(dir, "ui/colors")); got != "blue" {
		t.Errorf("ui/colors = %q", got)
	}
	for p, mode := range map[string]os.FileMode{"game.properties": 0o644, "ui/colors": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %o, want %o", p, fi.Mode().Perm(), mode)
		}
	}
}

func TestWriteAppliesModesWhateverTheUmask(t *testing.T) {
	w, dir := newWriter(t)
	if err := w.Write(map[string]FileProjection{"a": {Data: []byte("x"), Mode: 0o777}, "b": {Data: []byte("y"), Mode: 0o400}}); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"a": 0o777, "b": 0o400} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %o, want %o", p, fi.Mode().Perm(), mode)
		}
	}
}

func TestUpdateRemovesVanishedKeysAndTheOldVersion(t *testing.T) {
	w, dir := newWriter(t)
	if err := w.Write(map[string]FileProjection{"a": {Data: []byte("1"), Mode: 0o644}, "b": {Data: []byte("1"), Mode: 0o644}, "d/c": {Data: []byte("1"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(map[string]FileProjection{"a": {Data: []byte("2"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "a")); got != "2" {
		t.Errorf("a = %q, want 2", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	timestamped := 0
	for _, e := range entries {
		names = append(names, e.Name())
		if strings.HasPrefix(e.Name(), "..20") {
			timestamped++
		}
	}
	sort.Strings(names)
	// What is left: a, ..data and exactly one timestamped directory.
	if len(names) != 3 || timestamped != 1 || names[1] != "..data" || names[2] != "a" {
		t.Errorf("directory holds %v, want [..<ts> ..data a]", names)
	}
}

func TestInvalidPathsRefused(t *testing.T) {
	w, dir := newWriter(t)
	for _, p := range []string{"", "/etc/passwd", "../escape", "a/../../b", "..hidden", strings.Repeat("x", 256)} {
		if err := w.Write(map[string]FileProjection{p: {Data: []byte("x"), Mode: 0o644}}); err == nil {
			t.Errorf("Write(%q) succeeded, want an error", p)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused payload left %d entries", len(entries))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("a file escaped the target directory")
	}
}

// TestConcurrentReaderNeverSeesAHalfWrittenSet: two files carry the same
// generation number; a reader that opens both through the visible names
// must always find them equal while a writer rewrites them. A reader that
// resolved ..data once per file could see the swap in between, so the
// reader here does what a careful consumer does: resolve ..data, then read
// both files under that one directory. The plain visible paths are checked
// separately: each must always hold a whole value.
func TestConcurrentReaderNeverSeesAHalfWrittenSet(t *testing.T) {
	w, dir := newWriter(t)
	write := func(gen int) error {
		v := []byte(fmt.Sprintf("generation-%06d", gen))
		return w.Write(map[string]FileProjection{"left": {Data: v, Mode: 0o644}, "right": {Data: v, Mode: 0o644}})
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	const rewrites = 300
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mismatches, torn, reads int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			ts, err := os.Readlink(filepath.Join(dir, "..data"))
			if err != nil {
				torn++ // ..data must always exist once written
				continue
			}
			l, errL := os.ReadFile(filepath.Join(dir, ts, "left"))
			r, errR := os.ReadFile(filepath.Join(dir, ts, "right"))
			if errL != nil || errR != nil {
				continue // that version was removed after the swap: retry
			}
			reads++
			if !bytes.Equal(l, r) {
				mismatches++
			}
			// Through the visible name: a whole value or nothing. Nothing
			// (ENOENT) is the same race as above: the path went through
			// ..data to a version removed after the swap; a reader retries.
			v, err := os.ReadFile(filepath.Join(dir, "left"))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil || !bytes.HasPrefix(v, []byte("generation-")) || len(v) != len("generation-000000") {
				torn++
			}
		}
	}()
	for gen := 1; gen <= rewrites; gen++ {
		if err := write(gen); err != nil {
			close(done)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if mismatches != 0 || torn != 0 {
		t.Errorf("reader saw %d mismatched pairs and %d torn reads in %d reads", mismatches, torn, reads)
	}
	if reads == 0 {
		t.Error("the reader never completed a read")
	}
	if got := readFile(t, filepath.Join(dir, "right")); got != fmt.Sprintf("generation-%06d", rewrites) {
		t.Errorf("final content %q", got)
	}
}
