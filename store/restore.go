package store

import (
	"errors"
	"fmt"
	"io/fs"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// KeyCheck is what CheckSecretsKey found.
type KeyCheck struct {
	// Sealed is how many secrets the database holds (the key check value
	// not counted).
	Sealed int
	// Keyed is true when the database records which key sealed its secrets;
	// false for one that never had a secret store opened on it.
	Keyed bool
}

// CheckSecretsKey tells whether keyFile is the key the secrets sealed in the
// database at dbPath (a state.db or a backup of one, not open elsewhere for
// writing) were sealed with. The error wraps ErrDecrypt when they were sealed
// with another key, and fs.ErrNotExist when keyFile is missing while the
// database holds a key check; a key file that cannot be used at all (wrong
// size, group-readable) is an error wrapping neither. A database without a
// key check matches any key, or none.
func CheckSecretsKey(dbPath, keyFile string) (KeyCheck, error) {
	var kc KeyCheck
	var sealed []byte
	err := withBolt(dbPath, true, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketSecrets))
		if b == nil {
			return nil
		}
		if v := b.Get([]byte(keyCheckKey)); v != nil {
			kc.Keyed, sealed = true, append([]byte{}, v...)
		}
		kc.Sealed = b.Stats().KeyN
		if kc.Keyed {
			kc.Sealed--
		}
		return nil
	})
	if err != nil || !kc.Keyed {
		return kc, err
	}
	key, err := loadKey(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return kc, fmt.Errorf("%s holds secrets sealed with a key, and the key file %s does not exist: %w", dbPath, keyFile, err)
	}
	if err != nil {
		return kc, err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return kc, fmt.Errorf("key file %s: %w", keyFile, err)
	}
	if _, err := (&Secrets{aead: aead}).open(keyCheckKey, sealed); err != nil {
		return kc, fmt.Errorf("the secrets in %s were sealed with another key than %s: %w", dbPath, keyFile, err)
	}
	return kc, nil
}

// DropSecrets empties the sealed secrets (and the key check) and the setup
// ledgers of the database at dbPath, which must not be open elsewhere: what
// restoring a backup under another key leaves usable. Every setup is then
// pending again, so the secrets it stored are asked for anew. It returns how
// many secrets were dropped.
func DropSecrets(dbPath string) (int, error) {
	n := 0
	err := withBolt(dbPath, false, func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucketSecrets)); b != nil {
			n = b.Stats().KeyN
			if b.Get([]byte(keyCheckKey)) != nil {
				n--
			}
		}
		for _, name := range []string{bucketSecrets, BucketSetup} {
			if err := tx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return fmt.Errorf("drop bucket %q: %w", name, err)
			}
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return fmt.Errorf("create bucket %q: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// withBolt runs fn in one transaction (read-only or read-write) on the
// database at path, opened for this call alone, with bbolt's panics turned
// into errors wrapping ErrCorrupt. The file must exist.
func withBolt(path string, readOnly bool, fn func(*bolt.Tx) error) error {
	if fresh, err := preflight(path); err != nil {
		return err
	} else if fresh {
		return fmt.Errorf("store: %s: %w", path, fs.ErrNotExist)
	}
	db, err := openChecked(path, false, &bolt.Options{ReadOnly: readOnly, Timeout: defaultLockTimeout})
	if err != nil {
		return err
	}
	defer db.Close()
	return guard(path, func() error {
		if readOnly {
			return db.View(fn)
		}
		return db.Update(fn)
	})
}
