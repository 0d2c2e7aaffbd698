package store

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/clihost/clihost/internal/fixture"
)

// populated returns a state directory whose state.db holds n install records.
func populated(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Put(BucketInstall, "bundle-"+strings.Repeat("x", i%40)+string(rune('a'+i%26))+"@"+itoa(i), map[string]any{"i": i, "pad": strings.Repeat("p", 200)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func itoa(i int) string { return strconv.Itoa(i) }

// corruptions damage a populated state directory the ways an operator meets.
var corruptions = map[string]func(t *testing.T, path string){
	"meta pages overwritten": func(t *testing.T, path string) { fixture.Garble(t, path, 0, 2*int64(os.Getpagesize())) },
	"data pages overwritten": func(t *testing.T, path string) {
		fi, _ := os.Stat(path)
		fixture.Garble(t, path, 2*int64(os.Getpagesize()), fi.Size()-2*int64(os.Getpagesize()))
	},
	"zero length": func(t *testing.T, path string) {
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
	},
	"truncated": func(t *testing.T, path string) {
		fi, _ := os.Stat(path)
		if err := os.Truncate(path, fi.Size()/3); err != nil {
			t.Fatal(err)
		}
	},
	"directory in its place": func(t *testing.T, path string) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
	},
}

// TestOpenRefusesDamagedState: every damaged state.db is refused with an
// error wrapping ErrCorrupt that names the file and the restore command; no
// panic escapes, and the file is left exactly as it was (never replaced).
func TestOpenRefusesDamagedState(t *testing.T) {
	for name, damage := range corruptions {
		t.Run(name, func(t *testing.T) {
			dir := populated(t, 300)
			path := filepath.Join(dir, DBFile)
			damage(t, path)
			before := snapshot(t, path)
			for _, ro := range []bool{false, true} {
				// Each open gets its own copy: bbolt may panic inside its
				// Open after taking the flock, which then lasts as long as
				// the process (clihostd exits on ErrCorrupt).
				cp := copyState(t, dir)
				s, err := Open(cp, Options{ReadOnly: ro})
				if err == nil {
					_ = s.Close()
					t.Fatalf("Open(ReadOnly=%v) of a damaged state.db succeeded", ro)
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open(ReadOnly=%v): %v, want ErrCorrupt", ro, err)
				}
				for _, want := range []string{filepath.Join(cp, DBFile), "clihostctl state restore"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
			}
			if _, err := CheckFile(filepath.Join(copyState(t, dir), DBFile)); !errors.Is(err, ErrCorrupt) {
				t.Errorf("CheckFile: %v, want ErrCorrupt", err)
			}
			if after := snapshot(t, path); after != before {
				t.Errorf("state.db changed: %s, was %s", after, before)
			}
		})
	}
}

// snapshot describes path's type and content.
func snapshot(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.IsDir() {
		return "dir"
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().String() + ":" + strconv.Itoa(len(raw)) + ":" + string(raw[:min(len(raw), 64)]) + string(raw[max(0, len(raw)-64):])
}

// TestOpenMissingStartsFresh: only a missing state.db means a fresh start.
func TestOpenMissingStartsFresh(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	rep, err := CheckFile(filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rep.Keys[BucketInstall]; !ok {
		t.Errorf("report %+v lacks the install bucket", rep)
	}
}

// TestCheckFileCounts: a healthy database passes and its records are counted.
func TestCheckFileCounts(t *testing.T) {
	dir := populated(t, 300)
	rep, err := CheckFile(filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Keys[BucketInstall] != 300 {
		t.Errorf("install records = %d, want 300", rep.Keys[BucketInstall])
	}
}

// copyState copies dir's state.db (or the directory in its place) to a new
// state directory.
func copyState(t *testing.T, dir string) string {
	t.Helper()
	cp := t.TempDir()
	src := filepath.Join(dir, DBFile)
	fi, err := os.Lstat(src)
	if err != nil {
		t.Fatal(err)
	}
	if fi.IsDir() {
		if err := os.Mkdir(filepath.Join(cp, DBFile), 0o700); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cp, DBFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return cp
}

// BenchmarkCheck measures the consistency check Open runs, on a state.db of
// 10,000 records of 1 KiB (far more than a host's installs, setups and logins).
func BenchmarkCheck(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pad := strings.Repeat("p", 1024)
	err = s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(BucketSetup))
		for i := range 10000 {
			if err := bk.Put([]byte("bundle@1\x00/ws/"+strconv.Itoa(i)), []byte(`{"version":1,"data":"`+pad+`"}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.Check(); err != nil {
			b.Fatal(err)
		}
	}
	fi, _ := os.Stat(s.Path())
	b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
}
