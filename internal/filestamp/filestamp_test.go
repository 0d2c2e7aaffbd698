package filestamp

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStamp: a write, a same-size rewrite and a replacement each change the stamp; an answer read
// from a file changed within RacyWindow is not to be kept, one changed before it is.
func TestStamp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	write := func(s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	first, keep := Path(p)
	if keep {
		t.Error("a file written just now: keep, want not")
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	// Chtimes changes ctime to now: still racy.
	if _, keep := Path(p); keep {
		t.Error("a file whose change time is now: keep, want not")
	}
	saved := RacyWindow
	RacyWindow = 0
	t.Cleanup(func() { RacyWindow = saved })
	time.Sleep(10 * time.Millisecond)
	write("two") // same size
	second, keep := Path(p)
	if !keep || second == first {
		t.Errorf("same-size rewrite: keep %v, stamp changed %v; want true, true", keep, second != first)
	}
	q := p + ".new"
	if err := os.WriteFile(q, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(q, p); err != nil {
		t.Fatal(err)
	}
	if third, _ := Path(p); third == second {
		t.Error("a replaced file kept its stamp")
	}
	if _, keep := Path(filepath.Join(t.TempDir(), "missing")); keep {
		t.Error("a missing file: keep")
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := Of(fi); s != func() Stamp { s, _ := Path(p); return s }() {
		t.Error("Of and Path disagree")
	}
}
