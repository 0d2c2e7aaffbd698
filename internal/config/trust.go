package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// why is what a refusal of an untrusted file says.
const why = "whoever may change it chooses the flags of the program that reads it"

// maxLinks bounds the symlinks followed on the file's way (the kernel's own limit).
const maxLinks = 40

// checkTrusted refuses the open file f (named path) unless it is a regular file that only root or
// this process's user can change, through the file itself or any folder on its way: each folder
// entered while resolving path from the root, link by link, the folders holding each symlink of
// the chain included. Each must be owned by root or us and not writable by group or others (a
// sticky folder excepted, as /tmp: there only an entry's owner may rename it).
func checkTrusted(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("config file %s: not a regular file", path)
	}
	if err := checkEntry(path, path, st, false); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	refused := false
	err = WalkWay(abs, func(name string, st os.FileInfo) error {
		err := checkEntry(path, name, st, st.IsDir())
		refused = err != nil
		return err
	})
	if err != nil && !refused {
		return fmt.Errorf("config file %s: %w", path, err)
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
func checkEntry(path, name string, st os.FileInfo, dir bool) error {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if uid := int(sys.Uid); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("config file %s: %s is owned by uid %d: only root or this user may own the file and the folders above it (%s)", path, name, uid, why)
		}
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return nil // its target is checked on the resolved path
	}
	writable := st.Mode().Perm()&0o022 != 0
	switch {
	case !dir && writable:
		return fmt.Errorf("config file %s is writable by group or others (mode %v): chmod go-w it (%s)", path, st.Mode().Perm(), why)
	case dir && writable && st.Mode()&os.ModeSticky == 0:
		return fmt.Errorf("config file %s: the folder %s is writable by group or others (mode %v): chmod go-w it, or move the file (%s)", path, name, st.Mode().Perm(), why)
	}
	return nil
}
