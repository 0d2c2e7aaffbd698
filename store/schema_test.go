package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writeOld writes a state.db as a clihost of storage version v wrote it (v 0: from before
// versions were recorded, buckets but no version key), holding one install record.
func writeOld(t *testing.T, dir string, v string) string {
	t.Helper()
	path := filepath.Join(dir, DBFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{BucketInstall, BucketSetup, BucketAuth, BucketMeta, bucketSecrets} {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		rec := `{"version":3,"updated":"2026-01-02T03:04:05Z","data":{"method":"apt","bin_path":"/usr/bin/jq"}}`
		if err := tx.Bucket([]byte(BucketInstall)).Put([]byte("jq@1"), []byte(rec)); err != nil {
			return err
		}
		if v == "" {
			return nil
		}
		return tx.Bucket([]byte(BucketMeta)).Put([]byte(storageVersionKey), []byte(v))
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// rawVersion reads the version key straight from the file ("" when there is none).
func rawVersion(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(BucketMeta)); b != nil {
			v = string(b.Get([]byte(storageVersionKey)))
		}
		return nil
	})
	return v
}

// TestSchemaVersionWrittenAtCreate: a new state.db records this binary's storage version, and
// CheckFile reports it.
func TestSchemaVersionWrittenAtCreate(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if v, err := s.Version(); err != nil || v != SchemaVersion {
		t.Fatalf("Version() = %d, %v; want %d", v, err, SchemaVersion)
	}
	s.Close()
	rep, err := CheckFile(filepath.Join(dir, DBFile))
	if err != nil || rep.Version != SchemaVersion {
		t.Fatalf("CheckFile: version %d, %v; want %d", rep.Version, err, SchemaVersion)
	}
}

// TestSchemaMigratesVersion0: a state.db from before versions were recorded is version 0: a
// read-only open and CheckFile leave it so, a writable Open migrates it to version 1 and its
// records stay as they were.
func TestSchemaMigratesVersion0(t *testing.T) {
	dir := t.TempDir()
	path := writeOld(t, dir, "")
	rep, err := CheckFile(path)
	if err != nil || rep.Version != 0 {
		t.Fatalf("CheckFile of a version-0 file: version %d, %v; want 0", rep.Version, err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a version-0 file: %v", err)
	}
	if v, _ := ro.Version(); v != 0 {
		t.Errorf("read-only Version() = %d, want 0", v)
	}
	ro.Close()
	if got := rawVersion(t, path); got != "" {
		t.Fatalf("a read-only open wrote version %q", got)
	}
	s := openT(t, dir)
	defer s.Close()
	if v, err := s.Version(); err != nil || v != 1 {
		t.Fatalf("after Open: Version() = %d, %v; want 1", v, err)
	}
	var rec struct {
		Method  string `json:"method"`
		BinPath string `json:"bin_path"`
	}
	r, ok, err := s.Get(BucketInstall, "jq@1", &rec)
	if err != nil || !ok || rec.BinPath != "/usr/bin/jq" || r.Version != 3 {
		t.Fatalf("the record after migration: %+v %+v ok=%v err=%v", rec, r, ok, err)
	}
}

// TestSchemaNewerRefused: a state.db of a newer storage version is refused by every way of
// opening it, with a message naming both versions and what to do, and is left unchanged.
func TestSchemaNewerRefused(t *testing.T) {
	dir := t.TempDir()
	path := writeOld(t, dir, "2")
	for name, open := range map[string]func() error{
		"Open":      func() error { s, err := Open(dir, Options{}); closeIf(s); return err },
		"read-only": func() error { s, err := Open(dir, Options{ReadOnly: true}); closeIf(s); return err },
		"CheckFile": func() error { _, err := CheckFile(path); return err },
	} {
		err := open()
		if !errors.Is(err, ErrNewerSchema) {
			t.Errorf("%s: err %v, want ErrNewerSchema", name, err)
			continue
		}
		for _, want := range []string{"storage version 2", "versions up to 1", "restore a backup", path} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
	}
	if got := rawVersion(t, path); got != "2" {
		t.Errorf("the refused file's version is now %q, want 2", got)
	}
}

func closeIf(s *Store) {
	if s != nil {
		s.Close()
	}
}

// TestSchemaMigrationIsOneTransaction: a migration step that fails aborts Open and leaves the
// file as it was: no version recorded, nothing the failed step wrote.
func TestSchemaMigrationIsOneTransaction(t *testing.T) {
	dir := t.TempDir()
	path := writeOld(t, dir, "")
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = []migration{{from: 0, what: "a step that fails half way", run: func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte(BucketInstall)).Put([]byte("half@1"), []byte(`{}`)); err != nil {
			return err
		}
		return errors.New("disk says no")
	}}}
	if s, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "migrate storage version 0 to 1") {
		closeIf(s)
		t.Fatalf("Open with a failing migration: %v", err)
	}
	if got := rawVersion(t, path); got != "" {
		t.Errorf("version %q recorded after a failed migration", got)
	}
	rep, err := CheckFile(path)
	if err != nil || rep.Keys[BucketInstall] != 1 {
		t.Errorf("install records after a failed migration: %d, %v; want 1 (the failed step's write undone)", rep.Keys[BucketInstall], err)
	}
}

// TestSchemaVersionKeyReserved: the version key is the store's: Put refuses it and List skips it.
func TestSchemaVersionKeyReserved(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	if _, err := s.Put(BucketMeta, storageVersionKey, 99); err == nil {
		t.Fatal("Put of the storage version key succeeded")
	}
	if _, err := s.Put(BucketMeta, "other", 1); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := s.List(BucketMeta, "", func(k string, _ Record) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "other" {
		t.Errorf("List(meta) = %v, want [other]", keys)
	}
	if v, _ := s.Version(); v != SchemaVersion {
		t.Errorf("Version() = %d after Put to meta", v)
	}
}
