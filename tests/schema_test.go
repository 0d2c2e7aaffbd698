package tests

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/clihost/clihost/store"
)

// setStorageVersion writes v as state.db's storage version ("" removes it: a file from before
// versions were recorded), as another clihost would have.
func setStorageVersion(t *testing.T, db, v string) {
	t.Helper()
	b, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(store.BucketMeta))
		if v == "" {
			return meta.Delete([]byte("storage_version"))
		}
		return meta.Put([]byte("storage_version"), []byte(v))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStateSchemaVersion: the built binaries report state.db's storage version (--check-state,
// doctor), clihostd migrates a file from before versions were recorded when it starts, and refuses
// one from a newer clihost, naming both versions and what to do, leaving it as it was.
func TestStateSchemaVersion(t *testing.T) {
	dir := stateWithMarker(t)
	db := filepath.Join(dir, store.DBFile)
	if r := runDaemonToExit(t, nil, "--check-state", "--state", dir); r.code != 0 || !strings.Contains(r.stdout, "storage version 1)") {
		t.Fatalf("--check-state of a new file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	setStorageVersion(t, db, "")
	if r := runDaemonToExit(t, nil, "--check-state", "--state", dir); r.code != 0 || !strings.Contains(r.stdout, "storage version 0)") ||
		!strings.Contains(r.stdout, "migrates it when it next starts") {
		t.Fatalf("--check-state of a version-0 file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	d := startDaemon(t, dir, "--no-catalog")
	if r := d.ctl(t, "doctor", "--json"); !strings.Contains(r.stdout, "storage version 1, bbolt's consistency check passed") {
		t.Errorf("doctor does not report the migrated storage version:\n%s", r.stdout)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
	if r := runDaemonToExit(t, nil, "--check-state", "--state", dir); r.code != 0 || !strings.Contains(r.stdout, "storage version 1)") {
		t.Fatalf("--check-state after the migration: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	setStorageVersion(t, db, "2")
	for _, args := range [][]string{{"--state", dir, "--no-catalog", "--http", "127.0.0.1:0"}, {"--check-state", "--state", dir}} {
		r := runDaemonToExit(t, nil, args...)
		if r.code != 1 {
			t.Errorf("clihostd %v on a version-2 file: exit %d, want 1\n%s", args, r.code, r.stderr)
		}
		for _, want := range []string{db, "storage version 2", "knows versions up to 1", "restore a backup"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("clihostd %v: stderr does not say %q:\n%s", args, want, r.stderr)
			}
		}
	}
	s, err := store.Open(dir, store.Options{ReadOnly: true})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "storage version 2") {
		t.Errorf("the refused file was changed: read-only open %v", err)
	}
}
