package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func openSecretsT(t *testing.T) (*Store, *Secrets, string) {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, filepath.Join(dir, "state"))
	keyFile := filepath.Join(dir, "keys", "secrets.key")
	x, err := OpenSecrets(s, keyFile)
	if err != nil {
		t.Fatalf("OpenSecrets: %v", err)
	}
	return s, x, keyFile
}

func randomValue(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "s3cret-" + hex.EncodeToString(b)
}

func TestSecretsRoundTrip(t *testing.T) {
	s, x, keyFile := openSecretsT(t)
	scope := ScopeKey("openclaw@1", "/w", "alice")
	other := ScopeKey("openclaw@1", "/w", "bob")
	if _, ok, err := x.Get(scope, "openclaw/gateway-token"); ok || err != nil {
		t.Fatalf("Get absent = %v %v", ok, err)
	}
	for name, val := range map[string]string{"openclaw/gateway-token": "tok-1", "GH_TOKEN": "ghp_x", "EMPTY": ""} {
		if err := x.Put(scope, name, val); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Put(other, "GH_TOKEN", "bobs"); err != nil {
		t.Fatal(err)
	}
	if err := x.Put(scope, "GH_TOKEN", "ghp_y"); err != nil { // replace
		t.Fatal(err)
	}
	for name, want := range map[string]string{"openclaw/gateway-token": "tok-1", "GH_TOKEN": "ghp_y", "EMPTY": ""} {
		if got, ok, err := x.Get(scope, name); err != nil || !ok || got != want {
			t.Errorf("Get(%s) = %q %v %v, want %q", name, got, ok, err, want)
		}
	}
	if got, _, _ := x.Get(other, "GH_TOKEN"); got != "bobs" {
		t.Errorf("other scope = %q", got)
	}
	names, err := x.Names(scope)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"EMPTY", "GH_TOKEN", "openclaw/gateway-token"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Names = %q, want %q", names, want)
	}
	if err := x.Delete(scope, "GH_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if err := x.Delete(scope, "GH_TOKEN"); err != nil {
		t.Errorf("Delete missing: %v", err)
	}
	if _, ok, _ := x.Get(scope, "GH_TOKEN"); ok {
		t.Error("present after Delete")
	}
	if _, err := x.Names(""); err == nil {
		t.Error("Names(\"\") allowed")
	}
	if err := x.Put(scope, "", "v"); err == nil {
		t.Error("empty name allowed")
	}

	// The key file was created 0600, 32 bytes, in a 0700 directory.
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != KeySize {
		t.Errorf("key file mode %04o size %d, want 0600 and %d", st.Mode().Perm(), st.Size(), KeySize)
	}
	if st, _ := os.Stat(filepath.Dir(keyFile)); st.Mode().Perm() != 0o700 {
		t.Errorf("key dir mode %04o, want 0700", st.Mode().Perm())
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(keyFile), ".*tmp*")); len(m) != 0 {
		t.Errorf("temp files left behind: %q", m)
	}

	// Reopening store and key brings the values back.
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, dir)
	x2, err := OpenSecrets(s2, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := x2.Get(scope, "openclaw/gateway-token"); err != nil || !ok || got != "tok-1" {
		t.Errorf("after reopen: %q %v %v", got, ok, err)
	}
}

func TestSecretsNotInPlaintext(t *testing.T) {
	s, x, _ := openSecretsT(t)
	scope := ScopeKey("gh@2", "/w", "u")
	var vals []string
	for i := range 50 {
		v := randomValue(t)
		vals = append(vals, v)
		if err := x.Put(scope, "N"+string(rune('A'+i%26)), v); err != nil { // overwrites too
			t.Fatal(err)
		}
	}
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		if bytes.Contains(raw, []byte(v)) || bytes.Contains(raw, []byte(hex.EncodeToString([]byte(v)))) {
			t.Fatalf("secret value found in plaintext in %s", path)
		}
	}
	if !bytes.Contains(raw, []byte("NA")) {
		t.Error("sanity: names are expected in the file")
	}
}

func TestSecretsWrongKey(t *testing.T) {
	s, x, keyFile := openSecretsT(t)
	scope := ScopeKey("gh@2", "/w", "u")
	if err := x.Put(scope, "GH_TOKEN", "ghp_x"); err != nil {
		t.Fatal(err)
	}
	// Get under another key: an error, never garbage.
	otherKey := make([]byte, KeySize)
	_, _ = rand.Read(otherKey)
	aead, err := newAEAD(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	wrong := &Secrets{st: s, aead: aead, keyFile: "other.key"}
	got, ok, err := wrong.Get(scope, "GH_TOKEN")
	if !errors.Is(err, ErrDecrypt) || ok || got != "" {
		t.Fatalf("Get with wrong key = %q %v %v, want ErrDecrypt", got, ok, err)
	}
	if strings.Contains(err.Error(), "ghp_x") {
		t.Error("error carries the value")
	}
	// OpenSecrets with another key file is refused up front.
	other := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(other, otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSecrets(s, other); !errors.Is(err, ErrDecrypt) || !strings.Contains(err.Error(), "restore") {
		t.Errorf("OpenSecrets with another key = %v, want ErrDecrypt naming the fix", err)
	}
	// A missing key file with secrets in the db: no silent new key.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSecrets(s, keyFile); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("OpenSecrets with the key file gone = %v", err)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Error("a new key file was created over existing secrets")
	}
}

func TestSecretsTampered(t *testing.T) {
	s, x, _ := openSecretsT(t)
	a := ScopeKey("gh@2", "/w", "alice")
	b := ScopeKey("gh@2", "/w", "bob")
	if err := x.Put(a, "GH_TOKEN", "alice-token"); err != nil {
		t.Fatal(err)
	}
	ka, _ := secretKey(a, "GH_TOKEN")
	kb, _ := secretKey(b, "GH_TOKEN")
	ka2, _ := secretKey(a, "OTHER")
	rewrite := func(fn func(bk *bolt.Bucket) error) {
		t.Helper()
		if err := s.db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte(bucketSecrets))) }); err != nil {
			t.Fatal(err)
		}
	}
	var orig []byte
	rewrite(func(bk *bolt.Bucket) error {
		orig = append([]byte{}, bk.Get([]byte(ka))...)
		// Moved to another scope and to another name.
		if err := bk.Put([]byte(kb), orig); err != nil {
			return err
		}
		return bk.Put([]byte(ka2), orig)
	})
	if _, _, err := x.Get(b, "GH_TOKEN"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("ciphertext moved to another scope: %v, want ErrDecrypt", err)
	}
	if _, _, err := x.Get(a, "OTHER"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("ciphertext moved to another name: %v, want ErrDecrypt", err)
	}
	// Every single-byte flip, and truncations, fail.
	for i := range orig {
		bad := append([]byte{}, orig...)
		bad[i] ^= 0x01
		rewrite(func(bk *bolt.Bucket) error { return bk.Put([]byte(ka), bad) })
		if v, _, err := x.Get(a, "GH_TOKEN"); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("byte %d flipped: Get = %q, %v; want ErrDecrypt", i, v, err)
		}
	}
	for _, n := range []int{0, 1, 13, len(orig) - 1} {
		rewrite(func(bk *bolt.Bucket) error { return bk.Put([]byte(ka), orig[:n]) })
		if _, _, err := x.Get(a, "GH_TOKEN"); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	rewrite(func(bk *bolt.Bucket) error { return bk.Put([]byte(ka), orig) })
	if v, _, err := x.Get(a, "GH_TOKEN"); err != nil || v != "alice-token" {
		t.Errorf("restored: %q %v", v, err)
	}
}

func TestSecretsNoncePerWrite(t *testing.T) {
	s, x, _ := openSecretsT(t)
	scope := ScopeKey("gh@2", "/w", "u")
	k, _ := secretKey(scope, "N")
	seen := map[string]bool{}
	for range 20 {
		if err := x.Put(scope, "N", "same value"); err != nil {
			t.Fatal(err)
		}
		_ = s.db.View(func(tx *bolt.Tx) error {
			v := tx.Bucket([]byte(bucketSecrets)).Get([]byte(k))
			if seen[string(v)] {
				t.Errorf("identical ciphertext for two writes")
			}
			seen[string(v)] = true
			return nil
		})
	}
}

func TestSecretsKeyFileChecks(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, filepath.Join(dir, "state"))
	key := make([]byte, KeySize)
	_, _ = rand.Read(key)

	loose := filepath.Join(dir, "loose.key")
	if err := os.WriteFile(loose, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenSecrets(s, loose)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+loose) {
		t.Errorf("0644 key file: %v, want refusal saying chmod 600", err)
	}
	if err := os.Chmod(loose, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSecrets(s, loose); err == nil {
		t.Error("0640 key file accepted")
	}

	for _, n := range []int{0, 31, 33, 64} {
		short := filepath.Join(dir, "short.key")
		if err := os.WriteFile(short, bytes.Repeat([]byte{'a'}, n), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenSecrets(s, short); err == nil || !strings.Contains(err.Error(), "want exactly 32") {
			t.Errorf("%d-byte key file: %v, want refusal", n, err)
		}
		os.Remove(short)
	}
	if _, err := OpenSecrets(s, dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory as key file: %v", err)
	}

	// A correct existing file is used as is.
	good := filepath.Join(dir, "good.key")
	if err := os.WriteFile(good, key, 0o600); err != nil {
		t.Fatal(err)
	}
	x, err := OpenSecrets(s, good)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Put("scope", "n", "v"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(good); !bytes.Equal(got, key) {
		t.Error("existing key file was rewritten")
	}
}

func TestSecretsReadOnly(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "k")
	x, err := OpenSecrets(s, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Put("sc", "n", "v"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := OpenSecrets(r, filepath.Join(dir, "absent")); err == nil {
		t.Error("read-only OpenSecrets created a key")
	}
	rx, err := OpenSecrets(r, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := rx.Get("sc", "n"); err != nil || !ok || v != "v" {
		t.Errorf("read-only Get = %q %v %v", v, ok, err)
	}
	if err := rx.Put("sc", "n", "w"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Put = %v", err)
	}
}

func TestCreateKeyNoClobber(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	k1, err := createKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := createKey(p); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second createKey = %v, want ErrExist", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, k1) {
		t.Error("key clobbered")
	}
}
