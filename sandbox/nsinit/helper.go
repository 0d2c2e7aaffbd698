package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// HelperName is the file name of the small sandbox executable (cmd/clihost-sandbox). Installed next
// to the host's executable, it is what Command starts; it runs only this package's code, so a
// sandbox starts without the host's whole package initialisation.
const HelperName = "clihost-sandbox"

// selfExe is the host's own executable, the fallback when there is no helper.
const selfExe = "/proc/self/exe"

var helper struct {
	sync.Mutex
	path    string // the helper UseHelper set, or the one found next to os.Executable
	decided bool
}

// UseHelper makes Command start sandboxes with the executable at path (a build of
// cmd/clihost-sandbox, or any program that calls Main first) instead of looking for HelperName next
// to the host's executable. The file must be trustworthy: see checkHelper.
func UseHelper(path string) error {
	if err := checkHelper(path); err != nil {
		return err
	}
	helper.Lock()
	defer helper.Unlock()
	helper.path, helper.decided = path, true
	return nil
}

// executable returns what Command execs: the helper, when there is a trustworthy one (set by
// UseHelper, or HelperName beside os.Executable), else the host's own executable, which must call
// Main first thing.
func executable() string {
	helper.Lock()
	defer helper.Unlock()
	if !helper.decided {
		helper.decided = true
		if self, err := os.Executable(); err == nil {
			p := filepath.Join(filepath.Dir(self), HelperName)
			if checkHelper(p) == nil {
				helper.path = p
			}
		}
	}
	if helper.path != "" {
		return helper.path
	}
	return selfExe
}

// Starter reports what Command starts for each sandbox: the helper's path and true, or the host's
// own executable (os.Executable, or /proc/self/exe when it cannot be named) and false.
func Starter() (path string, isHelper bool) {
	if p := executable(); p != selfExe {
		return p, true
	}
	if self, err := os.Executable(); err == nil {
		return self, false
	}
	return selfExe, false
}

// checkHelper refuses a helper that someone other than root or this process's user could have
// replaced: it must be an absolute path to a regular, executable file owned by root or by this
// user and writable by neither group nor others, in a directory with the same properties.
func checkHelper(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("nsinit: helper %q is not an absolute path", path)
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("nsinit: helper: %w", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			return errors.New("nsinit: helper: no owner information")
		case sys.Uid != 0 && int(sys.Uid) != os.Geteuid():
			return fmt.Errorf("nsinit: helper: %s belongs to uid %d, neither root nor this user", p, sys.Uid)
		case st.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("nsinit: helper: %s is writable by group or others (%v)", p, st.Mode().Perm())
		}
		if p == path && (!st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0) {
			return fmt.Errorf("nsinit: helper: %s is not an executable file", p)
		}
	}
	return nil
}
