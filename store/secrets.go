package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// KeySize is the size of the secrets key file: raw AES-256 key bytes.
const KeySize = 32

const (
	secretFormatV1  byte = 1
	secretAADPrefix      = "clihost/secret/v1\x00"
	// keyCheckKey holds a sealed known value proving which key sealed the
	// bucket. Secret keys are netstrings and start with a digit, so it
	// cannot collide with one.
	keyCheckKey   = "!keycheck"
	keyCheckPlain = "clihost secrets key check v1"
)

// ErrDecrypt is wrapped by errors for sealed data that does not open under
// the loaded key: the key file is not the one the secrets were sealed with,
// or the database was altered.
var ErrDecrypt = errors.New("secret does not decrypt (wrong key file, or the stored ciphertext was altered)")

// Secrets is an encrypted secret store inside a Store's database (bucket
// "secrets"), sealed with AES-256-GCM under a 32-byte key kept in a key file.
// Each value is stored as 1 format byte, a random 12-byte nonce and the GCM
// ciphertext; the scope and name are the additional authenticated data, so a
// ciphertext copied under another scope or name fails to open. Scopes and
// names are stored in clear; values never are, and no error carries one.
// It is safe for concurrent use.
type Secrets struct {
	st      *Store
	aead    cipher.AEAD
	keyFile string
}

// OpenSecrets loads the key file, creating it with 32 random bytes (mode
// 0600, directory 0700, written atomically: temp file + fsync + link/rename +
// directory fsync) when absent. It refuses a key file that is group/other
// accessible or not exactly 32 bytes, with a message saying how to fix it.
//
// The database holds a sealed check value, so a key file that is not the
// one the stored secrets were sealed with is refused here (wrapping
// ErrDecrypt) rather than at the first Get; and when the key file is missing
// but the database already holds secrets, OpenSecrets refuses to make a new
// key (which would orphan them) and says to restore the file.
func OpenSecrets(s *Store, keyFile string) (*Secrets, error) {
	if s == nil {
		return nil, errors.New("store: open secrets: nil Store")
	}
	if keyFile == "" {
		return nil, errors.New("store: open secrets: empty key file path")
	}
	key, err := loadKey(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		if s.readOnly {
			return nil, fmt.Errorf("store: open secrets: key file %s does not exist and the store is open read-only, so none can be created: %w", keyFile, err)
		}
		sealed, rerr := rawSecret(s, keyCheckKey)
		if rerr != nil {
			return nil, fmt.Errorf("store: open secrets: %w", rerr)
		}
		if sealed != nil {
			return nil, fmt.Errorf("store: open secrets: key file %s is missing but %s holds secrets sealed with a key: restore the key file from backup (starting over with a new key would lose every stored secret)", keyFile, s.Path())
		}
		key, err = createKey(keyFile)
		if errors.Is(err, fs.ErrExist) { // created concurrently: use that one
			key, err = loadKey(keyFile)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: open secrets: %w", err)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("store: open secrets: key file %s: %w", keyFile, err)
	}
	x := &Secrets{st: s, aead: aead, keyFile: keyFile}
	if err := x.checkKey(); err != nil {
		return nil, fmt.Errorf("store: open secrets: %w", err)
	}
	return x, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// loadKey reads and checks a key file. A missing file yields an error
// wrapping fs.ErrNotExist.
func loadKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s is not a regular file (%s); point the key file setting at the file holding the %d key bytes", path, st.Mode().Type(), KeySize)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %04o, so group or others can access it; run `chmod 600 %s` (and make sure only clihostd's user owns it)", path, perm, path)
	}
	if st.Size() != KeySize {
		return nil, fmt.Errorf("key file %s is %d bytes, want exactly %d raw bytes (not hex or base64); restore the right file, or remove it to have a new key generated (secrets sealed with the old key are then lost)", path, st.Size(), KeySize)
	}
	key := make([]byte, KeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("key file %s: read: %w", path, err)
	}
	return key, nil
}

// createKey writes a new random key to path atomically and without
// clobbering: temp file (0600) + fsync, then a hard link to the final name
// (falling back to rename where links are unsupported), then a directory
// fsync. It returns an error wrapping fs.ErrExist when path appeared
// meanwhile.
func createKey(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key file directory: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // no-op after a rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("create key file: %w", err)
	}
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("create key file: write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("create key file: fsync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create key file %s: %w", path, err)
		}
		if _, serr := os.Lstat(path); serr == nil {
			return nil, fmt.Errorf("create key file %s: %w", path, fs.ErrExist)
		}
		if err := os.Rename(tmpName, path); err != nil {
			return nil, fmt.Errorf("create key file %s: %w", path, err)
		}
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return nil, fmt.Errorf("create key file %s: fsync directory: %w", path, err)
		}
	}
	return key, nil
}

// checkKey opens the sealed check value, writing it first when absent.
func (x *Secrets) checkKey() error {
	sealed, err := rawSecret(x.st, keyCheckKey)
	if err != nil {
		return err
	}
	if sealed != nil {
		if _, err := x.open(keyCheckKey, sealed); err != nil {
			return fmt.Errorf("key file %s is not the key the secrets in %s were sealed with; restore the original key file: %w", x.keyFile, x.st.Path(), ErrDecrypt)
		}
		return nil
	}
	if x.st.readOnly {
		return nil
	}
	err = x.st.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketSecrets))
		if err != nil {
			return err
		}
		if b.Get([]byte(keyCheckKey)) != nil {
			return nil // written concurrently; verified by the next OpenSecrets
		}
		return b.Put([]byte(keyCheckKey), x.seal(keyCheckKey, []byte(keyCheckPlain)))
	})
	if err != nil {
		return fmt.Errorf("write key check to %s: %w", x.st.Path(), err)
	}
	return nil
}

// secretKey is the bbolt key of (scope, name): two netstrings.
func secretKey(scope, name string) (string, error) {
	if scope == "" {
		return "", errors.New("empty scope")
	}
	if name == "" {
		return "", errors.New("empty secret name")
	}
	k := string(appendNetstring(appendNetstring(nil, scope), name))
	if len(k) > bolt.MaxKeySize {
		return "", fmt.Errorf("scope and name are %d bytes together, more than bbolt's %d", len(k), bolt.MaxKeySize)
	}
	return k, nil
}

func (x *Secrets) seal(dbKey string, plain []byte) []byte {
	ns := x.aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plain)+x.aead.Overhead())
	out[0] = secretFormatV1
	if _, err := rand.Read(out[1:]); err != nil {
		panic("store: crypto/rand failed: " + err.Error()) // never returns an error since Go 1.24
	}
	return x.aead.Seal(out, out[1:], plain, []byte(secretAADPrefix+dbKey))
}

func (x *Secrets) open(dbKey string, sealed []byte) ([]byte, error) {
	ns := x.aead.NonceSize()
	if len(sealed) < 1+ns+x.aead.Overhead() || sealed[0] != secretFormatV1 {
		return nil, ErrDecrypt
	}
	plain, err := x.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], []byte(secretAADPrefix+dbKey))
	if err != nil {
		return nil, ErrDecrypt
	}
	return plain, nil
}

// rawSecret copies the stored bytes under dbKey (nil when absent).
func rawSecret(s *Store, dbKey string) ([]byte, error) {
	var out []byte
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketSecrets))
		if b == nil {
			return nil
		}
		if v := b.Get([]byte(dbKey)); v != nil {
			out = append([]byte{}, v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Path(), err)
	}
	return out, nil
}

// describeScope renders a scope for error messages.
func describeScope(scope string) string {
	if b, w, u, ok := ParseScopeKey(scope); ok {
		return fmt.Sprintf("(bundle %q, workspace %q, user %q)", b, w, u)
	}
	return fmt.Sprintf("%q", scope)
}

// Put seals value under (scope, name) in one transaction, replacing any
// previous value. Use ScopeKey values as scopes.
func (x *Secrets) Put(scope, name, value string) error {
	k, err := secretKey(scope, name)
	if err != nil {
		return fmt.Errorf("store: put secret: %w", err)
	}
	if x.st.readOnly {
		return fmt.Errorf("store: put secret %q in scope %s: %w", name, describeScope(scope), ErrReadOnly)
	}
	sealed := x.seal(k, []byte(value))
	err = x.st.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketSecrets))
		if err != nil {
			return err
		}
		return b.Put([]byte(k), sealed)
	})
	if err != nil {
		return fmt.Errorf("store: put secret %q in scope %s: %w", name, describeScope(scope), err)
	}
	return nil
}

// Get opens the secret (scope, name). ok is false when there is none. A
// value that does not open (wrong key, tampered or moved ciphertext) is an
// error wrapping ErrDecrypt, never garbage.
func (x *Secrets) Get(scope, name string) (value string, ok bool, err error) {
	k, err := secretKey(scope, name)
	if err != nil {
		return "", false, fmt.Errorf("store: get secret: %w", err)
	}
	sealed, err := rawSecret(x.st, k)
	if err != nil {
		return "", false, fmt.Errorf("store: get secret %q in scope %s: %w", name, describeScope(scope), err)
	}
	if sealed == nil {
		return "", false, nil
	}
	plain, err := x.open(k, sealed)
	if err != nil {
		return "", false, fmt.Errorf("store: get secret %q in scope %s: %w; check the key file %s, or set the secret again", name, describeScope(scope), err, x.keyFile)
	}
	return string(plain), true, nil
}

// Delete removes the secret (scope, name) in one transaction. Deleting a
// missing secret is not an error.
func (x *Secrets) Delete(scope, name string) error {
	k, err := secretKey(scope, name)
	if err != nil {
		return fmt.Errorf("store: delete secret: %w", err)
	}
	if x.st.readOnly {
		return fmt.Errorf("store: delete secret %q in scope %s: %w", name, describeScope(scope), ErrReadOnly)
	}
	err = x.st.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketSecrets))
		if b == nil {
			return nil
		}
		return b.Delete([]byte(k))
	})
	if err != nil {
		return fmt.Errorf("store: delete secret %q in scope %s: %w", name, describeScope(scope), err)
	}
	return nil
}

// Names returns the names of the secrets stored under scope, sorted;
// never their values.
func (x *Secrets) Names(scope string) ([]string, error) {
	if scope == "" {
		return nil, errors.New("store: secret names: empty scope")
	}
	prefix := appendNetstring(nil, scope)
	var names []string
	err := x.st.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketSecrets))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, _ = c.Next() {
			name, rest, ok := readNetstring(string(k[len(prefix):]))
			if !ok || rest != "" {
				return fmt.Errorf("malformed secret key %q", k)
			}
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: secret names in scope %s: %w", describeScope(scope), err)
	}
	slices.Sort(names) // keys are netstrings, ordered by length first
	return names, nil
}
