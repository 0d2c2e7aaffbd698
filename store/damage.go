package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// closeWait bounds how long Close waits for bbolt once the database is
// damaged: a transaction that panicked half-way may keep bbolt's locks (its
// meta, mmap or writer lock) held for good. A variable for tests.
var closeWait = 5 * time.Second

// damagedError is the error every call returns once a transaction found the
// open database damaged.
type damagedError struct {
	corruptError
}

func (e *damagedError) Error() string {
	dir := filepath.Dir(e.path)
	return fmt.Sprintf("store: %s: %s: %s (found while it was open); it is no longer read or written, so the damage "+
		"does not spread. Stop clihostd, check the file with `clihostd --check-state --state %s`, and restore it from "+
		"a backup with `clihostctl state restore BACKUP --state %s`", e.path, ErrCorrupt, e.reason, dir, dir)
}

// Damaged returns the error wrapping ErrCorrupt that every call returns since
// a transaction found the database damaged, or nil while none has.
func (s *Store) Damaged() error {
	if e := s.damaged.Load(); e != nil {
		return e
	}
	return nil
}

// markDamaged records the damage (the first report wins), tells
// Options.OnDamaged once and returns the error later calls return too.
func (s *Store) markDamaged(reason string) error {
	e := &damagedError{corruptError{path: s.Path(), reason: reason}}
	if s.damaged.CompareAndSwap(nil, e) {
		if s.onDamaged != nil {
			s.onDamaged(e)
		}
		return e
	}
	return s.damaged.Load()
}

// view runs fn in a read transaction; see run.
func (s *Store) view(fn func(*bolt.Tx) error) error { return s.run(false, fn) }

// update runs fn in a read-write transaction; see run.
func (s *Store) update(fn func(*bolt.Tx) error) error { return s.run(true, fn) }

// run is the only way the Store's methods reach bbolt after Open. It fails
// fast once the database is known to be damaged, and turns bbolt's assertion
// panics and memory faults (a page overwritten or a file truncated under the
// mmap) into the damaged error, marking the Store damaged: no later
// transaction reads or writes it.
func (s *Store) run(write bool, fn func(*bolt.Tx) error) (err error) {
	if err := s.Damaged(); err != nil {
		return err
	}
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = s.markDamaged(fmt.Sprintf("bbolt failed on it: %v", r))
		}
	}()
	if write {
		return s.db.Update(fn)
	}
	return s.db.View(fn)
}

// closeDamaged closes a damaged database, waiting at most closeWait: a
// transaction that panicked may have left bbolt's locks held, and then the
// file and its flock are released only when the process exits.
func (s *Store) closeDamaged() error {
	done := make(chan error, 1)
	go func() { done <- s.db.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(closeWait):
		return errors.New("bbolt did not release it (a transaction failed half-way); its lock goes with this process")
	}
}
