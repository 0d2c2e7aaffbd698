package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrCorrupt is wrapped by the errors of Open and CheckFile when state.db
// exists but is not a consistent bbolt database: empty, truncated,
// unreadable, not a regular file, or with a damaged page.
var ErrCorrupt = errors.New("state database is damaged or unreadable")

// corruptError names the file, what is wrong and what an operator does about it.
type corruptError struct {
	path   string
	reason string
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("store: %s: %s: %s; it was left untouched. Restore it from a backup "+
		"(`clihostctl state restore BACKUP --state %s`, with clihostd stopped), or move it away to start with empty state "+
		"(installs, setups, logins and secrets are then lost)", e.path, ErrCorrupt, e.reason, filepath.Dir(e.path))
}

func (e *corruptError) Unwrap() error { return ErrCorrupt }

func corrupt(path, format string, args ...any) error {
	return &corruptError{path: path, reason: fmt.Sprintf(format, args...)}
}

// preflight decides, before bbolt sees the file, whether path may be opened:
// fresh is true when it does not exist (the only case in which a new, empty
// database is created). An empty, non-regular or unreadable file is refused:
// bbolt would silently initialise an empty one, or fail in ways that do not
// say what to do.
func preflight(path string) (fresh bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, corrupt(path, "cannot stat it: %v", err)
	}
	if !fi.Mode().IsRegular() {
		return false, corrupt(path, "it is not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() == 0 {
		return false, corrupt(path, "it is empty (0 bytes), so every record is gone")
	}
	f, err := os.Open(path)
	if err != nil {
		return false, corrupt(path, "cannot read it: %v", err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		return false, corrupt(path, "cannot read it: %v", err)
	}
	return false, nil
}

// guard runs fn with bbolt's assertion panics and memory faults (a page
// beyond the end of a truncated mmap) turned into an error naming path.
func guard(path string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = corrupt(path, "bbolt failed reading it: %v", r)
		}
	}()
	return fn()
}

// checkConsistency runs bbolt's consistency check over every page and compares the
// file's size with the pages its meta page claims.
func checkConsistency(db *bolt.DB, path string) error {
	return guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error { return consistent(tx, path) })
	})
}

// consistent is checkConsistency inside a read transaction.
func consistent(tx *bolt.Tx, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return corrupt(path, "cannot stat it: %v", err)
	}
	if fi.Size() < tx.Size() {
		return corrupt(path, "it is truncated: %d bytes, its meta page says %d", fi.Size(), tx.Size())
	}
	var errs []string
	for err := range tx.Check() {
		// bbolt's checker recovers its own assertion failures and
		// reports them as "panic: …"; say what they are instead.
		errs = append(errs, strings.Replace(err.Error(), "panic: ", "bbolt assertion: ", 1))
	}
	if len(errs) > 0 {
		if len(errs) > 5 {
			errs = append(errs[:5], fmt.Sprintf("… %d more", len(errs)-5))
		}
		return corrupt(path, "the consistency check failed: %s", strings.Join(errs, "; "))
	}
	return nil
}

// openChecked opens path with bbolt under guard and checks it. An existing
// file (fresh false) that bbolt refuses is reported as corrupt; bbolt's lock
// timeout is returned as is.
func openChecked(path string, fresh bool, opts *bolt.Options) (db *bolt.DB, err error) {
	err = guard(path, func() error {
		var oerr error
		db, oerr = bolt.Open(path, 0o600, opts)
		return oerr
	})
	if errors.Is(err, ErrCorrupt) {
		// bbolt panicked inside Open: its descriptor (and flock) stays open
		// until this process exits, which a caller that sees ErrCorrupt does.
		return nil, err
	}
	if err != nil {
		if !fresh && !errors.Is(err, berrors.ErrTimeout) {
			return nil, corrupt(path, "bbolt cannot open it: %v", err)
		}
		return nil, err
	}
	if err := checkConsistency(db, path); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// CheckReport is what CheckFile found.
type CheckReport struct {
	Path  string         // the file checked
	Size  int64          // its size in bytes
	Keys  map[string]int // records per bucket
	Pages int64          // pages the meta page claims
	// Version is the storage version the file records (0: from before versions were recorded;
	// Open migrates it); one newer than SchemaVersion fails the check with ErrNewerSchema.
	Version int
}

// CheckFile checks the bbolt database at path (a state.db or a backup of one)
// read-only: it must exist, be a non-empty regular file, open, match its
// meta page's size and pass bbolt's consistency check. The error wraps
// ErrCorrupt when the file is damaged, os.ErrNotExist when it is missing and
// ErrLocked when a writer holds it.
func CheckFile(path string) (CheckReport, error) {
	rep := CheckReport{Path: path, Keys: map[string]int{}}
	fresh, err := preflight(path)
	if err != nil {
		return rep, err
	}
	if fresh {
		return rep, fmt.Errorf("store: check %s: %w", path, os.ErrNotExist)
	}
	db, err := openChecked(path, false, &bolt.Options{ReadOnly: true, Timeout: defaultLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return rep, lockedErr(filepath.Dir(path))
	}
	if err != nil {
		return rep, err
	}
	defer db.Close()
	err = guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			rep.Size = tx.Size()
			rep.Pages = tx.Size() / int64(db.Info().PageSize)
			v, err := readVersion(tx, path)
			if err != nil {
				return err
			}
			if rep.Version = v; v > SchemaVersion {
				return newerError(path, v)
			}
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				rep.Keys[string(name)] = b.Stats().KeyN
				return nil
			})
		})
	})
	return rep, err
}

// Check runs bbolt's consistency check over the open database (as Open did),
// in a read transaction: writers are not blocked. The error wraps ErrCorrupt;
// a failed check marks the Store damaged, as a failed transaction does.
func (s *Store) Check() error {
	err := s.view(func(tx *bolt.Tx) error { return consistent(tx, s.Path()) })
	var ce *corruptError
	if errors.As(err, &ce) {
		return s.markDamaged(ce.reason)
	}
	return err
}

// Backup writes a consistent copy of the database to w, online (bbolt's
// Tx.WriteTo in a read transaction: writers are not blocked), and returns
// the bytes written.
func (s *Store) Backup(w io.Writer) (n int64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: backup %s: %w", s.Path(), err)
	}
	return n, nil
}
