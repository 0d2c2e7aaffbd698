// Package store keeps clihostd's lifecycle state (install, setup, auth and
// meta records, plus sealed secrets) in a single bbolt database,
// <dir>/state.db.
//
// Every state change is exactly one bbolt read-write transaction, and bbolt
// fsyncs on commit, so a process killed at any point loses no committed change
// and never leaves a torn record. Values are JSON, wrapped in a Record that
// carries a per-key version (1, 2, 3, … one per change) and the time of the
// last change.
//
// Only one process may have a state directory open at a time: Open takes
// bbolt's flock on state.db (exclusive for writers, shared for ReadOnly) and,
// when it cannot get it in Options.LockTimeout, fails with an error wrapping
// ErrLocked. A writable Open records its pid in <dir>/clihostd.pid (removed
// again by Close) so that error can name the holder.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Buckets used by the lifecycle packages. Any other non-empty name is also
// accepted (created on first write), except the reserved "secrets" bucket,
// which only Secrets may touch.
const (
	BucketInstall = "install" // by bundle key (id@major)
	BucketSetup   = "setup"   // by scope key (bundle, workspace, user)
	BucketAuth    = "auth"    // by scope key
	BucketMeta    = "meta"
)

const (
	// DBFile is the database file's name inside the state directory.
	DBFile = "state.db"
	// PIDFile is the file a writable Open records its pid in, inside the
	// state directory; Close removes it. It is informational only (the lock
	// is bbolt's flock on state.db), used to name the holder in ErrLocked
	// errors.
	PIDFile = "clihostd.pid"

	bucketSecrets      = "secrets"
	defaultLockTimeout = 200 * time.Millisecond
	flockRetryStep     = 50 * time.Millisecond // bbolt's flockRetryTimeout
)

// ErrLocked is wrapped by the error Open returns when another process holds
// the state directory.
var ErrLocked = errors.New("state directory is locked by another process")

// ErrReadOnly is wrapped by the errors of writes to a Store opened ReadOnly.
var ErrReadOnly = errors.New("store is open read-only")

// Options tune Open.
type Options struct {
	// LockTimeout is how long Open waits for the file lock; 0 means 200ms,
	// a negative value means a single attempt.
	LockTimeout time.Duration
	// ReadOnly opens the database read-only under a shared lock: several
	// read-only opens may coexist, but none with a writer. The database must
	// already exist.
	ReadOnly bool
	// OnDamaged, when set, is called once, with the error later calls return,
	// when a transaction finds the open database damaged (see Damaged).
	OnDamaged func(error)
}

// Store is an open state directory. It is safe for concurrent use.
type Store struct {
	dir      string
	db       *bolt.DB
	readOnly bool
	pidFile  string // written by this Store; "" when none

	damaged   atomic.Pointer[damagedError] // set once a transaction found the file damaged
	onDamaged func(error)
}

// Record is a stored value with its version: Version starts at 1 and
// increases by one with each change; Updated is when it last changed.
// (A deleted key starts again at 1 when it is written next.)
type Record struct {
	Version uint64          `json:"version"`
	Updated time.Time       `json:"updated"`
	Data    json.RawMessage `json:"data"`
}

// Open opens (creating if needed, dir 0700, file 0600) <dir>/state.db.
//
// Only a missing state.db is created. One that exists but is empty, not a
// regular file, unreadable, truncated or fails bbolt's consistency check
// (run at every Open) is refused with an error wrapping ErrCorrupt that names
// the file and how to restore it; it is never replaced. No bbolt panic
// escapes Open.
//
// When another process has it open, Open returns, after o.LockTimeout, an
// error wrapping ErrLocked that names the directory, says another clihostd
// (or clihostctl) is using it and how to find that process: the pid recorded
// in <dir>/clihostd.pid when it is still alive, otherwise `fuser`.
// A writable Open writes <dir>/clihostd.pid; a ReadOnly one does not.
func Open(dir string, o Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("store: open: empty state directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	dir = abs
	path := filepath.Join(dir, DBFile)
	fresh, err := preflight(path)
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		if fresh {
			return nil, fmt.Errorf("store: open %s read-only: %w (start clihostd once to create it, or check the state directory)", path, os.ErrNotExist)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create state directory: %w", err)
	}
	timeout := o.LockTimeout
	switch {
	case timeout == 0:
		timeout = defaultLockTimeout + flockRetryStep
	case timeout < 0:
		timeout = time.Nanosecond // non-zero and below bbolt's retry step: one attempt
	default:
		timeout += flockRetryStep // bbolt gives up one retry step early
	}
	db, err := openChecked(path, fresh, &bolt.Options{Timeout: timeout, ReadOnly: o.ReadOnly})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, lockedErr(dir)
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{dir: dir, db: db, readOnly: o.ReadOnly, onDamaged: o.OnDamaged}
	if o.ReadOnly {
		if v, err := s.Version(); err != nil || v > SchemaVersion {
			_ = db.Close()
			if err == nil {
				err = newerError(path, v)
			}
			return nil, err
		}
		return s, nil
	}
	err = guard(path, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			for _, b := range []string{BucketInstall, BucketSetup, BucketAuth, BucketMeta, bucketSecrets} {
				if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
					return fmt.Errorf("create bucket %q: %w", b, err)
				}
			}
			_, err := migrate(tx, path)
			return err
		})
	})
	if errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrCorrupt) {
		_ = db.Close()
		return nil, err
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: initialise %s: %w", path, err)
	}
	pf := filepath.Join(dir, PIDFile)
	if err := os.WriteFile(pf, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err == nil {
		s.pidFile = pf
	} // else: the pid file is only a hint for error messages; the lock holds without it.
	return s, nil
}

// lockedError is the error Open returns when the state directory is in use.
type lockedError struct {
	dir  string
	pid  int    // 0 when unknown
	comm string // process name, when known
}

func (e *lockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: state directory %s is in use by another clihostd (or clihostctl) process", e.dir)
	if e.pid > 0 {
		fmt.Fprintf(&b, ": pid %d", e.pid)
		if e.comm != "" {
			fmt.Fprintf(&b, " (%s)", e.comm)
		}
		fmt.Fprintf(&b, ", recorded in %s", filepath.Join(e.dir, PIDFile))
	} else {
		fmt.Fprintf(&b, "; find it with `fuser -v %s`", filepath.Join(e.dir, DBFile))
	}
	b.WriteString("; stop that process (or work through it), or use a different state directory")
	return b.String()
}

func (e *lockedError) Unwrap() error { return ErrLocked }

func lockedErr(dir string) error {
	e := &lockedError{dir: dir}
	raw, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil {
		return e
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return e
	}
	e.pid = pid
	if comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil {
		e.comm = strings.TrimSpace(string(comm))
	}
	return e
}

// Close releases the database and its lock, and removes the pid file this
// Store wrote (if it still names this process).
func (s *Store) Close() error {
	if s.pidFile != "" {
		if raw, err := os.ReadFile(s.pidFile); err == nil && strings.TrimSpace(string(raw)) == strconv.Itoa(os.Getpid()) {
			_ = os.Remove(s.pidFile)
		}
		s.pidFile = ""
	}
	closeDB := s.db.Close
	if s.Damaged() != nil {
		closeDB = s.closeDamaged
	}
	if err := closeDB(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.db.Path(), err)
	}
	return nil
}

// Dir returns the state directory (absolute).
func (s *Store) Dir() string { return s.dir }

// Path returns the database file's path, <dir>/state.db.
func (s *Store) Path() string { return s.db.Path() }

func checkBucket(bucket string) error {
	switch bucket {
	case "":
		return errors.New("empty bucket name")
	case bucketSecrets:
		return fmt.Errorf("bucket %q is reserved for Secrets", bucket)
	}
	return nil
}

func checkKey(bucket, key string) error {
	if err := checkBucket(bucket); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("empty key in bucket %q", bucket)
	}
	if bucket == BucketMeta && key == storageVersionKey {
		return fmt.Errorf("key %q of bucket %q is reserved for the storage version", key, bucket)
	}
	if len(key) > bolt.MaxKeySize {
		return fmt.Errorf("key in bucket %q is %d bytes, more than bbolt's %d", bucket, len(key), bolt.MaxKeySize)
	}
	return nil
}

func (s *Store) writable(op, bucket, key string) error {
	if s.readOnly {
		return fmt.Errorf("store: %s %s/%q: %w", op, bucket, key, ErrReadOnly)
	}
	return nil
}

// decodeRecord parses a stored envelope. The result does not alias raw (which
// may point into bbolt's mmap).
func decodeRecord(raw []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return Record{}, fmt.Errorf("corrupt record: %w", err)
	}
	if r.Version == 0 || len(r.Data) == 0 {
		return Record{}, errors.New("corrupt record: missing version or data")
	}
	return r, nil
}

// encodeRecord builds the stored envelope for data at version v.
func encodeRecord(v uint64, data []byte) ([]byte, error) {
	return json.Marshal(Record{Version: v, Updated: time.Now().UTC(), Data: data})
}

// putTx writes data under key as the successor of whatever is stored there.
func putTx(b *bolt.Bucket, key string, data []byte) (uint64, error) {
	var prev uint64
	if raw := b.Get([]byte(key)); raw != nil {
		r, err := decodeRecord(raw)
		if err != nil {
			return 0, err
		}
		prev = r.Version
	}
	enc, err := encodeRecord(prev+1, data)
	if err != nil {
		return 0, err
	}
	if err := b.Put([]byte(key), enc); err != nil {
		return 0, err
	}
	return prev + 1, nil
}

// Get decodes the value under bucket/key into v (skipped when v is nil).
// ok is false when there is none. When the value does not decode into v,
// rec and ok are still returned with the error.
func (s *Store) Get(bucket, key string, v any) (rec Record, ok bool, err error) {
	if err := checkKey(bucket, key); err != nil {
		return Record{}, false, fmt.Errorf("store: get: %w", err)
	}
	err = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		raw := b.Get([]byte(key))
		if raw == nil {
			return nil
		}
		r, err := decodeRecord(raw)
		if err != nil {
			return err
		}
		rec, ok = r, true
		return nil
	})
	if err != nil {
		return Record{}, false, fmt.Errorf("store: get %s/%q: %w", bucket, key, err)
	}
	if ok && v != nil {
		if err := json.Unmarshal(rec.Data, v); err != nil {
			return rec, true, fmt.Errorf("store: get %s/%q (version %d): decode into %T: %w", bucket, key, rec.Version, v, err)
		}
	}
	return rec, ok, nil
}

// Put stores v (as JSON) under bucket/key in one transaction and returns the
// new version.
func (s *Store) Put(bucket, key string, v any) (version uint64, err error) {
	if err := checkKey(bucket, key); err != nil {
		return 0, fmt.Errorf("store: put: %w", err)
	}
	if err := s.writable("put", bucket, key); err != nil {
		return 0, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("store: put %s/%q: encode %T: %w", bucket, key, v, err)
	}
	err = s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		version, err = putTx(b, key, data)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: put %s/%q: %w", bucket, key, err)
	}
	return version, nil
}

// Update reads the current record (nil Data and Version 0 when absent) and
// stores what fn returns, in ONE read-write transaction, so concurrent
// updates serialize and none is lost. It returns the new version.
//
// If fn returns an error nothing is written and that error is returned
// (wrapped). If fn returns (nil, nil) the record is deleted (if present) and
// the version returned is 0. fn runs inside the transaction: it must be quick
// and must not call the Store (that would deadlock). cur.Data is fn's own
// copy.
func (s *Store) Update(bucket, key string, fn func(cur Record) (next any, err error)) (version uint64, err error) {
	if err := checkKey(bucket, key); err != nil {
		return 0, fmt.Errorf("store: update: %w", err)
	}
	if err := s.writable("update", bucket, key); err != nil {
		return 0, err
	}
	var fnPanic any // fn's own panic: not the database's fault, so it goes on to the caller
	err = s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		var cur Record
		if raw := b.Get([]byte(key)); raw != nil {
			if cur, err = decodeRecord(raw); err != nil {
				return err
			}
		}
		next, err := callerFn(fn, cur, &fnPanic)
		if err != nil {
			return err
		}
		if next == nil {
			version = 0
			return b.Delete([]byte(key))
		}
		data, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode %T: %w", next, err)
		}
		enc, err := encodeRecord(cur.Version+1, data)
		if err != nil {
			return err
		}
		version = cur.Version + 1
		return b.Put([]byte(key), enc)
	})
	if fnPanic != nil {
		panic(fnPanic)
	}
	if err != nil {
		return 0, fmt.Errorf("store: update %s/%q: %w", bucket, key, err)
	}
	return version, nil
}

// errCallerPanicked rolls back the transaction of an Update whose fn panicked.
var errCallerPanicked = errors.New("fn panicked")

// callerFn calls an Update's fn, catching its panic into *p (the transaction
// then rolls back, and Update panics again once it is over) so that it is not
// taken for bbolt's.
func callerFn(fn func(Record) (any, error), cur Record, p *any) (next any, err error) {
	defer func() {
		if r := recover(); r != nil {
			*p, err = r, errCallerPanicked
		}
	}()
	return fn(cur)
}

// Delete removes bucket/key in one transaction. Deleting a missing key is not
// an error.
func (s *Store) Delete(bucket, key string) error {
	if err := checkKey(bucket, key); err != nil {
		return fmt.Errorf("store: delete: %w", err)
	}
	if err := s.writable("delete", bucket, key); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("store: delete %s/%q: %w", bucket, key, err)
	}
	return nil
}

// List calls fn for each record whose key starts with prefix ("" for all),
// in key (byte) order. The records are a consistent snapshot read in one
// transaction; fn is called after that transaction ends, so it may call the
// Store. An error from fn stops the walk and is returned as is.
func (s *Store) List(bucket, prefix string, fn func(key string, rec Record) error) error {
	if err := checkBucket(bucket); err != nil {
		return fmt.Errorf("store: list: %w", err)
	}
	type kv struct {
		key string
		rec Record
	}
	var all []kv
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		p := []byte(prefix)
		c := b.Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if v == nil || (bucket == BucketMeta && string(k) == storageVersionKey) {
				continue // a nested bucket (we create none), or the storage version
			}
			r, err := decodeRecord(v)
			if err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			all = append(all, kv{string(k), r})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: list %s/%q: %w", bucket, prefix, err)
	}
	for _, e := range all {
		if err := fn(e.key, e.rec); err != nil {
			return err
		}
	}
	return nil
}
