package store

import (
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the storage version this binary writes: the layout of its buckets and records.
// A state.db records its version in the meta bucket (etcd's storage version is the model); Open
// migrates an older file to this version and refuses a newer one. Version 0 is a file written
// before versions were recorded (no version key); version 1 is the same layout with the key.
const SchemaVersion = 1

// storageVersionKey is the meta bucket's key holding the storage version (decimal ASCII). It is
// the store's own: Get, Put, Delete and List do not reach it.
const storageVersionKey = "storage_version"

// ErrNewerSchema is wrapped by the error Open and CheckFile return for a state.db whose storage
// version is newer than SchemaVersion: a newer clihost wrote it, and this one would misread it.
var ErrNewerSchema = errors.New("state database is from a newer clihost")

// migration turns a database at version from into one at from+1, inside the transaction that
// then records from+1; an error aborts the transaction and so every migration Open ran.
type migration struct {
	from int
	what string
	run  func(tx *bolt.Tx) error
}

// migrations is the path from version 0 to SchemaVersion, one step per version, in order. A
// change of layout adds a step here and raises SchemaVersion by one.
var migrations = []migration{
	// Files from before versions were recorded already have version 1's layout.
	{from: 0, what: "record the storage version", run: func(*bolt.Tx) error { return nil }},
}

// readVersion is the storage version recorded in tx's meta bucket: 0 when none is.
func readVersion(tx *bolt.Tx, path string) (int, error) {
	b := tx.Bucket([]byte(BucketMeta))
	if b == nil {
		return 0, nil
	}
	raw := b.Get([]byte(storageVersionKey))
	if raw == nil {
		return 0, nil
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return 0, corrupt(path, "its storage version %q is not a version", raw)
	}
	return v, nil
}

// newerError refuses a database whose storage version v is newer than this binary's.
func newerError(path string, v int) error {
	return fmt.Errorf("store: %s has storage version %d, but this clihost knows versions up to %d: %w; "+
		"run the clihost that wrote it (install it again, or a newer one), or restore a backup this version made (clihostctl state restore FILE)",
		path, v, SchemaVersion, ErrNewerSchema)
}

// migrate brings the database in tx to SchemaVersion and records it; it refuses a newer database.
// It runs in Open's read-write transaction, so that a database is migrated all the way or not at
// all. It returns the version the file had.
func migrate(tx *bolt.Tx, path string) (int, error) {
	v, err := readVersion(tx, path)
	if err != nil {
		return v, err
	}
	if v > SchemaVersion {
		return v, newerError(path, v)
	}
	from := v
	for _, m := range migrations {
		if m.from != v || v >= SchemaVersion {
			continue
		}
		if err := m.run(tx); err != nil {
			return from, fmt.Errorf("migrate storage version %d to %d (%s): %w", v, v+1, m.what, err)
		}
		v++
	}
	if v != SchemaVersion {
		return from, fmt.Errorf("no migration from storage version %d to %d", v, SchemaVersion)
	}
	if from == SchemaVersion {
		return from, nil
	}
	b, err := tx.CreateBucketIfNotExists([]byte(BucketMeta))
	if err != nil {
		return from, fmt.Errorf("create bucket %q: %w", BucketMeta, err)
	}
	return from, b.Put([]byte(storageVersionKey), []byte(strconv.Itoa(v)))
}

// Version is the storage version of the open database: SchemaVersion once a writable Open has
// migrated it; a ReadOnly Store reports what the file records (0 for a file from before versions).
func (s *Store) Version() (int, error) {
	var v int
	err := s.view(func(tx *bolt.Tx) (err error) {
		v, err = readVersion(tx, s.Path())
		return err
	})
	return v, err
}
