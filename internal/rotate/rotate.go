// Package rotate is an append-only log file that rotates itself by size: clihost's audit log
// (audit.jsonl), which tool calls write to and which must never fill the host's disk.
//
// When a write would take the file past MaxSize, the file is rotated first: path.N-1 → path.N, …,
// path → path.1, and a new empty path takes its place. At most Keep rotated files are kept, so the
// log never holds much more than (Keep+1) × MaxSize bytes. Every name is always a complete file:
// the current file is hard-linked to path.1 and a new file, created as path.new, is renamed over
// path, so a reader never finds path missing. Files are created with mode 0600. A path that is
// not a regular file (/dev/stderr, /dev/null) is written as it is, never rotated.
//
// One File is safe for concurrent use. Several processes may append to the same path (clihostd
// and an in-process clihostctl call share ~/.local/state/clihost/audit.jsonl): each write takes an
// exclusive flock(2) on the file it appends to and reopens path first when another process has
// rotated it, so exactly one of them rotates and no line lands in a file already rotated away
// (beyond what the other process had written before it noticed).
package rotate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Options configure a File.
type Options struct {
	// MaxSize is the size in bytes past which the file is rotated; it must be positive. A single
	// write larger than MaxSize is written whole to a fresh file.
	MaxSize int64
	// Keep is how many rotated files (path.1 … path.Keep) are kept; 0 keeps none.
	Keep int
}

// File is an append-only file at a path, rotated by size (see the package documentation).
type File struct {
	path string
	opts Options

	plain bool // not a regular file (a terminal, /dev/null): written, never rotated

	mu sync.Mutex
	f  *os.File // nil once closed
}

// Open opens (creating it with mode 0600 if needed) the log at path for appending.
func Open(path string, opts Options) (*File, error) {
	if opts.MaxSize <= 0 {
		return nil, fmt.Errorf("rotate %s: maximum size %d is not positive", path, opts.MaxSize)
	}
	if opts.Keep < 0 {
		return nil, fmt.Errorf("rotate %s: keep %d is negative", path, opts.Keep)
	}
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rotate %s: %w", path, err)
	}
	return &File{path: path, opts: opts, f: f, plain: !st.Mode().IsRegular()}, nil
}

// Names returns every file a log at path with keep rotated files may use: path, path.1 …
// path.keep and the name a new file is created under before it replaces path. A sandbox must
// mask all of them.
func Names(path string, keep int) []string {
	out := []string{path}
	for i := 1; i <= keep; i++ {
		out = append(out, rotated(path, i))
	}
	return append(out, newName(path))
}

// Path returns the path of the current file.
func (r *File) Path() string { return r.path }

// Write appends p, rotating first when the file would grow past MaxSize. Callers write whole
// records (one JSON line) per call, so a record never straddles two files.
func (r *File) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, fmt.Errorf("rotate %s: %w", r.path, fs.ErrClosed)
	}
	if r.plain {
		return r.f.Write(p)
	}
	for attempt := 0; ; attempt++ {
		if err := flock(r.f, syscall.LOCK_EX); err != nil {
			return 0, fmt.Errorf("rotate %s: lock: %w", r.path, err)
		}
		current, size, err := r.isCurrent()
		if err == nil && !current {
			// Another process rotated path: append to the new file instead. Only the holder
			// of the current file's lock may rotate, so a stale file is never written or
			// rotated.
			_ = flock(r.f, syscall.LOCK_UN)
			if attempt == maxReopen {
				return 0, fmt.Errorf("rotate %s: the file keeps being replaced", r.path)
			}
			if err = r.reopen(); err != nil {
				return 0, err
			}
			continue
		}
		if err == nil && size > 0 && size+int64(len(p)) > r.opts.MaxSize {
			err = r.rotate()
		}
		if err != nil {
			_ = flock(r.f, syscall.LOCK_UN)
			return 0, err
		}
		n, err := r.f.Write(p)
		_ = flock(r.f, syscall.LOCK_UN)
		if err != nil {
			return n, fmt.Errorf("rotate %s: %w", r.path, err)
		}
		return n, nil
	}
}

// maxReopen bounds how often one write follows rotations by other processes.
const maxReopen = 100

// Close closes the current file.
func (r *File) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// isCurrent reports whether the open file is still the one at path, and its size.
func (r *File) isCurrent() (bool, int64, error) {
	open, err := r.f.Stat()
	if err != nil {
		return false, 0, fmt.Errorf("rotate %s: %w", r.path, err)
	}
	named, err := os.Stat(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, open.Size(), nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("rotate %s: %w", r.path, err)
	}
	return os.SameFile(open, named), open.Size(), nil
}

// reopen replaces the open file by the one now at path.
func (r *File) reopen() error {
	f, err := openAppend(r.path)
	if err != nil {
		return err
	}
	r.f.Close()
	r.f = f
	return nil
}

// rotate shifts the rotated files up by one (dropping the oldest), links the current file as
// path.1 and renames a new empty file over path, then appends to that one. The caller holds
// the current file's lock, which every writer takes, so no other process rotates meanwhile.
func (r *File) rotate() error {
	if r.opts.Keep > 0 {
		if err := os.Remove(rotated(r.path, r.opts.Keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", r.path, err)
		}
		for i := r.opts.Keep - 1; i >= 1; i-- {
			if err := os.Rename(rotated(r.path, i), rotated(r.path, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("rotate %s: %w", r.path, err)
			}
		}
		if err := os.Link(r.path, rotated(r.path, 1)); err != nil {
			return fmt.Errorf("rotate %s: %w", r.path, err)
		}
	}
	tmp := newName(r.path)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) { // left by a crash
		return fmt.Errorf("rotate %s: %w", r.path, err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("rotate %s: %w", r.path, err)
	}
	// Lock the new file before it takes path's place: a writer of another process that opens
	// it (or was waiting on the old one) must wait until the caller's write is done.
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("rotate %s: lock: %w", r.path, err)
	}
	if err := os.Rename(tmp, r.path); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("rotate %s: %w", r.path, err)
	}
	_ = flock(r.f, syscall.LOCK_UN)
	r.f.Close()
	r.f = f
	return nil
}

// openAppend opens path for appending, creating it with mode 0600, and narrows the mode of an
// existing regular file to 0600.
func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("rotate %s: %w", path, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return f, nil // a device: its mode is not ours to change
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("rotate %s: %w", path, err)
	}
	return f, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func rotated(path string, i int) string { return path + "." + strconv.Itoa(i) }

func newName(path string) string { return path + ".new" }
