package config

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// why is what a refusal of an untrusted file says.
const why = "whoever may change it chooses the flags of the program that reads it"

// checkTrusted refuses the open file f (named path) unless it is a regular file that only root or
// this process's user can change, through the file itself or any folder on its way (as named and
// resolved): owned by root or us, and not writable by group or others (a sticky folder excepted,
// as /tmp: there only an entry's owner may rename it).
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
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	for _, p := range []string{abs, real} {
		for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
			st, err := os.Lstat(dir)
			if err != nil {
				return fmt.Errorf("config file %s: %w", path, err)
			}
			if err := checkEntry(path, dir, st, true); err != nil {
				return err
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return nil
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
