package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds the symlinks followed on the file's way (the kernel's own limit).
const maxLinks = 40

// A Kind is a kind of file read with ReadTrusted: what its errors call it (What: "config file")
// and why one that others may change is refused (Why).
type Kind struct{ What, Why string }

// configFile is what ReadFile reads.
var configFile = Kind{What: "config file", Why: "whoever may change it chooses the flags of the program that reads it"}

// ReadTrusted opens and reads path as a file of kind k, refusing one that is not a regular file,
// larger than 1 MiB, or that someone other than root or this process's user could change (see
// checkTrusted). Opening never waits (a FIFO is refused, not read). An error opening it wraps the
// open's own error (os.ErrNotExist for a missing file).
func ReadTrusted(path string, k Kind) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading must not wait for a writer before checkTrusted
	// refuses it (it changes nothing for a regular file's reads).
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.What, err)
	}
	defer f.Close()
	if err := k.checkTrusted(f, path); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", k.What, path, err)
	}
	if len(data) > maxSize {
		return nil, fmt.Errorf("%s %s: larger than %d bytes", k.What, path, maxSize)
	}
	return data, nil
}

// checkTrusted refuses the open file f (named path) unless it is a regular file that only root or
// this process's user can change, through the file itself or any folder on its way: each folder
// entered while resolving path from the root, link by link, the folders holding each symlink of
// the chain included. Each must be owned by root or us and not writable by group or others (a
// sticky folder excepted, as /tmp: there only an entry's owner may rename it).
func (k Kind) checkTrusted(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s %s: %w", k.What, path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s %s: not a regular file", k.What, path)
	}
	if err := k.checkEntry(path, path, st, false); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", k.What, path, err)
	}
	refused := false
	err = WalkWay(abs, func(name string, st os.FileInfo) error {
		err := k.checkEntry(path, name, st, st.IsDir())
		refused = err != nil
		return err
	})
	if err != nil && !refused {
		return fmt.Errorf("%s %s: %w", k.What, path, err)
	}
	return err
}

// WalkWay resolves the absolute path p from the root one entry at a time, as the kernel does, and
// calls check on each entry it meets: the root, each folder it enters, each symlink (whose target
// is then walked the same way, wherever it points) and the last entry. So every folder whose
// writer could change what p names is checked, the folders holding the links of its chain
// included, not only those on the named and the resolved paths. At most 40 links are followed.
func WalkWay(p string, check func(name string, st os.FileInfo) error) error {
	st, err := os.Lstat("/")
	if err != nil {
		return err
	}
	if err := check("/", st); err != nil {
		return err
	}
	links := 0
	_, err = walkChain(p, check, &links)
	return err
}

// walkChain walks the absolute path p for WalkWay and returns it resolved.
func walkChain(p string, check func(string, os.FileInfo) error, links *int) (string, error) {
	cur := "/"
	for _, name := range strings.Split(filepath.Clean(p), "/") {
		if name == "" {
			continue
		}
		next := filepath.Join(cur, name) // cur is resolved: ".." is its parent, as for the kernel
		st, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if err := check(next, st); err != nil {
			return "", err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if *links++; *links > maxLinks {
			return "", fmt.Errorf("more than %d symbolic links on the way to %s", maxLinks, p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		if cur, err = walkChain(target, check, links); err != nil {
			return "", err
		}
	}
	return cur, nil
}

// checkEntry checks one entry on the file's way: name is the file itself or (dir) a folder above.
func (k Kind) checkEntry(path, name string, st os.FileInfo, dir bool) error {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if uid := int(sys.Uid); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("%s %s: %s is owned by uid %d: only root or this user may own the file and the folders above it (%s)", k.What, path, name, uid, k.Why)
		}
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return nil // its target is checked on the resolved path
	}
	writable := st.Mode().Perm()&0o022 != 0
	switch {
	case !dir && writable:
		return fmt.Errorf("%s %s is writable by group or others (mode %v): chmod go-w it (%s)", k.What, path, st.Mode().Perm(), k.Why)
	case dir && writable && st.Mode()&os.ModeSticky == 0:
		return fmt.Errorf("%s %s: the folder %s is writable by group or others (mode %v): chmod go-w it, or move the file (%s)", k.What, path, name, st.Mode().Perm(), k.Why)
	}
	return nil
}
