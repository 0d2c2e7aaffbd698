package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// liveDamage damages the state.db of an open Store, on disk under its mmap.
var liveDamage = map[string]func(t *testing.T, path string){
	"meta pages overwritten": corruptions["meta pages overwritten"],
	"data pages overwritten": corruptions["data pages overwritten"],
	"truncated":              corruptions["truncated"],
	"zero length":            corruptions["zero length"],
	"one data page overwritten": func(t *testing.T, path string) {
		fixture.Garble(t, path, 4*int64(os.Getpagesize()), int64(os.Getpagesize()))
	},
}

// storeOp is one call through the Store's API.
type storeOp struct {
	name  string
	write bool
	run   func(s *Store, x *Secrets) error
}

var storeOps = []storeOp{
	{"List", false, func(s *Store, _ *Secrets) error {
		return s.List(BucketInstall, "", func(string, Record) error { return nil })
	}},
	{"Get", false, func(s *Store, _ *Secrets) error { _, _, err := s.Get(BucketMeta, "marker", nil); return err }},
	{"Put", true, func(s *Store, _ *Secrets) error { _, err := s.Put(BucketInstall, "new@1", "v"); return err }},
	{"Update", true, func(s *Store, _ *Secrets) error {
		_, err := s.Update(BucketInstall, "bundle-a@0", func(Record) (any, error) { return "w", nil })
		return err
	}},
	{"Delete", true, func(s *Store, _ *Secrets) error { return s.Delete(BucketInstall, "bundle-b@1") }},
	{"Secrets.Get", false, func(_ *Store, x *Secrets) error { _, _, err := x.Get("scope", "token"); return err }},
	{"Secrets.Put", true, func(_ *Store, x *Secrets) error { return x.Put("scope", "token", "v2") }},
	{"Secrets.Names", false, func(_ *Store, x *Secrets) error { _, err := x.Names("scope"); return err }},
	{"Secrets.Delete", true, func(_ *Store, x *Secrets) error { return x.Delete("scope", "token") }},
	{"Check", false, func(s *Store, _ *Secrets) error { return s.Check() }},
	{"Backup", false, func(s *Store, _ *Secrets) error { _, err := s.Backup(&bytes.Buffer{}); return err }},
}

// TestDamageWhileOpen: a state.db damaged on disk while a Store has it open
// (pages overwritten, the file truncated under bbolt's mmap) makes the first
// transaction that meets the damage, a read or a write, return an error
// wrapping ErrCorrupt that names the file and what to do, never a panic; the
// Store marks itself damaged and tells OnDamaged exactly once; every later
// call, concurrent ones too, fails at once with the same error, and nothing
// is written to the file any more. Close still returns.
func TestDamageWhileOpen(t *testing.T) {
	defer func(w time.Duration) { closeWait = w }(closeWait)
	closeWait = 100 * time.Millisecond // Close waits this long for locks a failed transaction kept
	for name, damage := range liveDamage {
		for _, first := range []storeOp{storeOps[0], storeOps[2]} {
			t.Run(name+"/first "+first.name, func(t *testing.T) {
				dir := populated(t, 300)
				path := filepath.Join(dir, DBFile)
				var told atomic.Int32
				s, err := Open(dir, Options{OnDamaged: func(error) { told.Add(1) }})
				if err != nil {
					t.Fatal(err)
				}
				x, err := OpenSecrets(s, filepath.Join(t.TempDir(), "secrets.key"))
				if err != nil {
					t.Fatal(err)
				}
				// Positive control: every call works on the healthy file.
				if err := x.Put("scope", "token", "v1"); err != nil {
					t.Fatal(err)
				}
				for _, op := range storeOps {
					if err := op.run(s, x); err != nil {
						t.Fatalf("%s on the healthy database: %v", op.name, err)
					}
				}

				damage(t, path)
				err = first.run(s, x)
				assertDamaged(t, first.name, err, path)
				if told.Load() != 1 {
					t.Fatalf("OnDamaged called %d times, want 1", told.Load())
				}
				if !errors.Is(s.Damaged(), ErrCorrupt) {
					t.Fatalf("Damaged() = %v", s.Damaged())
				}
				want := s.Damaged().Error()
				before := snapshot(t, path)
				var wg sync.WaitGroup
				for _, op := range storeOps {
					wg.Go(func() {
						if got := op.run(s, x); got == nil || !strings.HasSuffix(got.Error(), want) {
							t.Errorf("%s after the damage: %v, want it to end in Damaged()'s error", op.name, got)
						}
					})
				}
				wg.Wait()
				if told.Load() != 1 {
					t.Errorf("OnDamaged called %d times, want 1", told.Load())
				}
				if after := snapshot(t, path); after != before {
					t.Errorf("state.db written after the damage was found")
				}
				_ = s.Close() // returns (bounded), whatever bbolt's locks
			})
		}
	}
}

func assertDamaged(t *testing.T, op string, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s on the damaged database: %v, want ErrCorrupt", op, err)
	}
	for _, want := range []string{path, "clihostd --check-state --state " + filepath.Dir(path), "clihostctl state restore BACKUP --state " + filepath.Dir(path), "Stop clihostd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not say %q", op, err, want)
		}
	}
}
