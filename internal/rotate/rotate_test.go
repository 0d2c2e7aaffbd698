package rotate

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// lines reads the log's files, oldest first (path.keep … path.1, path), and returns their lines.
func lines(t *testing.T, path string, keep int) []string {
	t.Helper()
	var out []string
	for i := keep; i >= 0; i-- {
		name := path
		if i > 0 {
			name = rotated(path, i)
		}
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		f.Close()
	}
	return out
}

// checkFiles asserts that every file of the log is at most max bytes, has mode 0600, and that
// no file beyond path.keep (nor the temporary name) exists.
func checkFiles(t *testing.T, path string, keep int, max int64) {
	t.Helper()
	for _, name := range Names(path, keep)[:keep+1] {
		st, err := os.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > max {
			t.Errorf("%s: %d bytes, over the maximum %d", name, st.Size(), max)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	for _, name := range []string{rotated(path, keep+1), newName(path)} {
		if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists (err %v)", name, err)
		}
	}
}

func TestRotateKeepsNewestWithinLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	r, err := Open(path, Options{MaxSize: 100, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := range 40 {
		line := fmt.Sprintf(`{"n":%03d,"pad":"xxxxxxxxxx"}`, i) // 29 bytes + newline
		all = append(all, line)
		if _, err := r.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, 2, 100)
	got := lines(t, path, 2)
	// Three 30-byte lines fit in 100 bytes; 40 = 13 × 3 + 1, so the current file holds the
	// last line and the two rotated ones the three before it each.
	if want := all[len(all)-7:]; !slices.Equal(got, want) {
		t.Errorf("kept lines\n%q\nwant the newest 7\n%q", got, want)
	}
}

func TestRotateKeepZeroAndOversizedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	r, err := Open(path, Options{MaxSize: 10, Keep: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, s := range []string{"abc\n", "a record longer than ten bytes\n", "def\n"} {
		if _, err := r.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := lines(t, path, 0); !slices.Equal(got, []string{"def"}) {
		t.Errorf("lines %q, want only the last record", got)
	}
	if _, err := os.Stat(rotated(path, 1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("keep 0 left %s (%v)", rotated(path, 1), err)
	}
}

func TestOpenNarrowsModeAndRefusesBadOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, Options{MaxSize: 1 << 20, Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	for _, o := range []Options{{MaxSize: 0, Keep: 1}, {MaxSize: -1}, {MaxSize: 10, Keep: -1}} {
		if _, err := Open(path, o); err == nil {
			t.Errorf("Open with %+v succeeded", o)
		}
	}
	if _, err := r.Write([]byte("x\n")); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
}

// TestRotateConcurrentWriters writes from many goroutines through two Files on the same path
// (two open file descriptions, as two processes have): every line lands exactly once, whole,
// and no file passes the maximum. A reader polling the path meanwhile never finds it missing.
func TestRotateConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const keep, max = 1000, 512
	a, err := Open(path, Options{MaxSize: max, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, Options{MaxSize: max, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var missing atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if _, err := os.Stat(path); err != nil {
				missing.Add(1)
			}
		}
	}()
	var wg sync.WaitGroup
	want := map[string]bool{}
	for w := range 8 {
		f := a
		if w%2 == 1 {
			f = b
		}
		for i := range 150 {
			want[fmt.Sprintf("writer %d line %03d", w, i)] = true
		}
		wg.Go(func() {
			for i := range 150 {
				if _, err := f.Write(fmt.Appendf(nil, "writer %d line %03d\n", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	<-done
	a.Close()
	b.Close()
	if n := missing.Load(); n != 0 {
		t.Errorf("a reader found %s missing %d times during rotation", path, n)
	}
	checkFiles(t, path, keep, max)
	got := lines(t, path, keep)
	seen := map[string]bool{}
	for _, l := range got {
		if !want[l] || seen[l] {
			t.Errorf("unexpected or repeated line %q", l)
		}
		seen[l] = true
	}
	if len(seen) != len(want) {
		t.Errorf("%d lines kept, want %d", len(seen), len(want))
	}
	if n := len(Names(path, keep)); n != keep+2 || !strings.HasSuffix(Names(path, keep)[n-1], ".new") {
		t.Errorf("Names: %d names", n)
	}
}

// TestDeviceIsNotRotated: a log opened on a device is written as is, never renamed.
func TestDeviceIsNotRotated(t *testing.T) {
	r, err := Open(os.DevNull, Options{MaxSize: 1, Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 3 {
		if _, err := r.Write([]byte("line\n")); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 || st.Mode().Perm() != 0o666 {
		t.Fatalf("%s changed: %v %v", os.DevNull, st.Mode(), err)
	}
	if _, err := os.Stat(os.DevNull + ".1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s.1 exists", os.DevNull)
	}
}
