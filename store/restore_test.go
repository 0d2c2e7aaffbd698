package store

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// TestCheckSecretsKey: a database's key check opens with its own key file, not with another one
// (ErrDecrypt) nor without one (fs.ErrNotExist); a database that never sealed a secret matches
// any key; DropSecrets leaves one that matches any key, with its other records.
func TestCheckSecretsKey(t *testing.T) {
	plain := populated(t, 3)
	if kc, err := CheckSecretsKey(filepath.Join(plain, DBFile), filepath.Join(t.TempDir(), "none.key")); err != nil || kc.Keyed {
		t.Fatalf("no secrets: %+v, %v", kc, err)
	}
	dir := populated(t, 3)
	key := filepath.Join(t.TempDir(), "secrets.key")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := OpenSecrets(s, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if err := x.Put("scope", n, "v"); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	db := filepath.Join(dir, DBFile)
	if kc, err := CheckSecretsKey(db, key); err != nil || !kc.Keyed || kc.Sealed != 2 {
		t.Fatalf("own key: %+v, %v", kc, err)
	}
	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := createKey(other); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckSecretsKey(db, other); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("another key: %v, want ErrDecrypt", err)
	}
	if _, err := CheckSecretsKey(db, other+".missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no key file: %v, want ErrNotExist", err)
	}
	if n, err := DropSecrets(db); err != nil || n != 2 {
		t.Fatalf("DropSecrets = %d, %v; want 2", n, err)
	}
	if kc, err := CheckSecretsKey(db, other); err != nil || kc.Keyed {
		t.Fatalf("after DropSecrets: %+v, %v", kc, err)
	}
	if rep, err := CheckFile(db); err != nil || rep.Keys[BucketInstall] != 3 {
		t.Fatalf("after DropSecrets: %+v, %v", rep, err)
	}
}
