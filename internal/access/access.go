// Package access answers one question for clihostd: may the user uid, with primary group gid and
// supplementary groups, read, write and search the directory dir? The daemon asks it before it
// lets a control-socket caller name a workspace, and before it runs anything in a workspace as a
// uid other than its own (docs/operations.md, "Identity: who runs, HOME, which workspace").
//
// A root process asks the kernel: on an OS thread of its own it switches that thread's filesystem
// uid and gid and its supplementary groups to the user's with raw system calls (setgroups,
// setfsgid, setfsuid: glibc and Go's syscall.Setgroups would change every thread of the process),
// which also drops the thread's filesystem capabilities, then calls faccessat2 with AT_EACCESS, so
// that modes, ACLs, read-only mounts and every directory on the path count exactly as they would
// for the user. The thread is switched back before the Go scheduler gets it again, and never
// given back when that fails (see onThreadAs). No answer is ever kept.
//
// A process that is not root cannot take another identity. For its own uid it asks the kernel as
// itself; for another uid it reads the mode bits of the directory and the search bits of every
// directory above it, and fails closed where a POSIX ACL could decide otherwise (an ACL on a
// directory the user does not own).
package access

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Who is the identity access is checked for.
type Who struct {
	UID, GID int
	Groups   []int // supplementary groups
}

// DeniedError says that who may not use a directory, and why.
type DeniedError struct {
	Dir    string
	Reason string
}

func (e *DeniedError) Error() string { return e.Dir + ": " + e.Reason }

// ErrDenied matches every DeniedError (errors.Is).
var ErrDenied = errors.New("access denied")

// Is reports whether target is ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// CheckDir returns nil when who may read, write and search the directory dir (an absolute path,
// symbolic links followed as the kernel follows them for that user), a *DeniedError when it may
// not, and another error when the question could not be answered (which callers treat as denied).
func CheckDir(dir string, who Who) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("access: %q is not an absolute path", dir)
	}
	if os.Geteuid() == 0 {
		return kernelAs(dir, who)
	}
	if who.UID == os.Geteuid() {
		return kernelSelf(dir)
	}
	return modeBits(dir, who)
}

// rwx is what a workspace needs: read, write and search.
const rwx = unix.R_OK | unix.W_OK | unix.X_OK

// kernelSelf asks the kernel whether this process may use dir.
func kernelSelf(dir string) error {
	if err := isDir(dir); err != nil {
		return err
	}
	return denied(dir, unix.Faccessat2(unix.AT_FDCWD, dir, rwx, unix.AT_EACCESS))
}

// kernelAs asks the kernel, on a locked OS thread that takes who's filesystem identity and is
// never unlocked (it exits with the goroutine), whether who may use dir.
func kernelAs(dir string, who Who) error {
	return onThreadAs(who, func() error {
		if err := isDir(dir); err != nil {
			return err
		}
		return denied(dir, unix.Faccessat2(unix.AT_FDCWD, dir, rwx, unix.AT_EACCESS))
	})
}

// CheckWrites asks, of each of paths (absolute) in order, whether who may write the file or
// directory there (symbolic links followed as the kernel follows them for that user; a directory
// also needs search), in one check on one thread when the process is root. It returns -1 and nil
// when who may write them all; else the index of the first path refused, with a *DeniedError, or
// with another error when the question could not be answered. Only root can ask it for a uid other
// than its own.
func CheckWrites(paths []string, who Who) (int, error) {
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			return i, fmt.Errorf("access: %q is not an absolute path", p)
		}
	}
	failed := -1
	check := func() error {
		for i, p := range paths {
			if err := writable(p); err != nil {
				failed = i
				return err
			}
		}
		return nil
	}
	var err error
	switch {
	case len(paths) == 0:
		return -1, nil
	case os.Geteuid() == 0:
		err = onThreadAs(who, check)
	case who.UID == os.Geteuid():
		err = check()
	default:
		return 0, fmt.Errorf("access: uid %d cannot check %s for uid %d", os.Geteuid(), paths[0], who.UID)
	}
	if err != nil && failed < 0 {
		failed = 0 // the identity switch itself failed
	}
	return failed, err
}

// writable asks the kernel, as the calling thread, whether path may be written (a directory also
// searched).
func writable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return &DeniedError{Dir: path, Reason: errText(err)}
	}
	mode := uint32(unix.W_OK)
	if st.IsDir() {
		mode |= unix.X_OK
	}
	if err := unix.Faccessat2(unix.AT_FDCWD, path, mode, unix.AT_EACCESS); err != nil {
		return &DeniedError{Dir: path, Reason: "not writable: " + errText(err)}
	}
	return nil
}

// onThreadAs runs check on a locked OS thread switched, just before, to who's groups, fsgid and
// fsuid, without effective capabilities unless who is root (see becomeOnThread), and switched back
// after to the groups, ids and capabilities it had (see restoreThread). The check runs on a
// goroutine of its own, which the scheduler usually runs on the caller's own thread as the caller
// waits: no other thread is woken. Its thread goes back to the scheduler only once it has what it
// had before (read back); else the goroutine ends locked and the runtime ends the thread with it.
// (Go starts new threads from a thread of its own while one is locked: none inherits the switch.)
//
// The process must not change its credentials process-wide (syscall.Setgroups, Setuid, …, which
// reach every thread) while checks run: a check's thread would take back what it had before the
// change (TestNoProcessWideCredentialChange keeps them out of the daemon).
func onThreadAs(who Who, check func() error) error {
	if who.UID < 0 || who.GID < 0 {
		return fmt.Errorf("access: invalid identity %d:%d", who.UID, who.GID)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := threadIdentity()
		if err == nil {
			if err = becomeOnThread(who); err == nil {
				err = check()
			}
			if restoreThread(own) != nil {
				done <- errors.New("access: the thread could not take its own identity back")
				return // locked: its thread ends with this goroutine
			}
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// threadState is what onThreadAs changes of a thread: its groups, fsgid and fsuid, and its
// capability sets.
type threadState struct {
	who  Who
	caps [2]unix.CapUserData
}

// capHeader is capget's and capset's header for the calling thread.
func capHeader() *unix.CapUserHeader {
	return &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
}

// threadIdentity returns the calling thread's state.
func threadIdentity() (threadState, error) {
	who, err := identityOfThread()
	if err != nil {
		return threadState{}, err
	}
	st := threadState{who: *who}
	if err := unix.Capget(capHeader(), &st.caps[0]); err != nil {
		return threadState{}, fmt.Errorf("access: capget: %w", err)
	}
	return st, nil
}

// restoreThread gives the calling thread back st: its capability sets (those setgroups needs),
// its groups, fsgid and fsuid, its capability sets again (taking fsuid 0 back raises every
// permitted filesystem capability, whatever was effective before), and reads them back.
func restoreThread(st threadState) error {
	setCaps := func() error {
		caps := st.caps
		if err := unix.Capset(capHeader(), &caps[0]); err != nil {
			return fmt.Errorf("access: capset: %w", err)
		}
		return nil
	}
	if err := setCaps(); err != nil {
		return err
	}
	if err := becomeOnThread(st.who); err != nil {
		return err
	}
	if err := setCaps(); err != nil {
		return err
	}
	if now, err := threadIdentity(); err != nil || now.caps != st.caps {
		return errors.New("access: the thread's capabilities did not come back")
	}
	return nil
}

// identityOfThread returns the calling thread's supplementary groups, fsgid and fsuid (what
// becomeOnThread sets).
func identityOfThread() (*Who, error) {
	n, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, 0, 0, 0)
	if e != 0 {
		return nil, fmt.Errorf("access: getgroups: %w", e)
	}
	raw := make([]uint32, n)
	if n > 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&raw[0])), 0); e != 0 {
			return nil, fmt.Errorf("access: getgroups: %w", e)
		}
	}
	who := &Who{Groups: make([]int, n)}
	for i, g := range raw {
		who.Groups[i] = int(g)
	}
	gid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0) // -1 changes nothing: the current one
	uid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	who.GID, who.UID = int(gid), int(uid)
	return who, nil
}

// becomeOnThread switches the calling (locked) thread to who's groups, fsgid and fsuid, and reads
// them back. For a who that is not root it also empties the thread's effective capabilities (the
// permitted ones stay, for restoreThread): the kernel drops the filesystem ones as fsuid leaves 0,
// but not under SECBIT_NO_SETUID_FIXUP, where the check would answer as root.
func becomeOnThread(who Who) error {
	groups := make([]uint32, 0, len(who.Groups))
	for _, g := range who.Groups {
		if g < 0 {
			return fmt.Errorf("access: invalid group %d", g)
		}
		groups = append(groups, uint32(g))
	}
	var ptr unsafe.Pointer
	if len(groups) > 0 {
		ptr = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(ptr), 0); e != 0 {
		return fmt.Errorf("access: setgroups: %w", e)
	}
	// setfsgid and setfsuid return the previous id and cannot report failure: read back.
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(who.GID), 0, 0)
	if prev, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); int(prev) != who.GID {
		return fmt.Errorf("access: setfsgid %d did not take (%d)", who.GID, prev)
	}
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(who.UID), 0, 0)
	if prev, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); int(prev) != who.UID {
		return fmt.Errorf("access: setfsuid %d did not take (%d)", who.UID, prev)
	}
	now, err := identityOfThread()
	if err != nil || !slices.Equal(now.Groups, slices.Sorted(slices.Values(who.Groups))) { // the kernel sorts them
		return fmt.Errorf("access: setgroups %v did not take", who.Groups)
	}
	if who.UID == 0 {
		return nil
	}
	var caps [2]unix.CapUserData
	if err := unix.Capget(capHeader(), &caps[0]); err != nil {
		return fmt.Errorf("access: capget: %w", err)
	}
	caps[0].Effective, caps[1].Effective = 0, 0
	if err := unix.Capset(capHeader(), &caps[0]); err != nil {
		return fmt.Errorf("access: drop the effective capabilities: %w", err)
	}
	if err := unix.Capget(capHeader(), &caps[0]); err != nil || caps[0].Effective != 0 || caps[1].Effective != 0 {
		return errors.New("access: the effective capabilities did not go")
	}
	return nil
}

// CheckExec returns nil when who may execute the file at path (absolute), a *DeniedError naming
// the first directory on its path who may not search, or the file itself, when it may not, and
// another error when the question could not be answered. A root process asks the kernel as who
// (as CheckDir does); another process can only ask for itself, and answers nil for another uid
// (it never runs anything as another uid).
func CheckExec(path string, who Who) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("access: %q is not an absolute path", path)
	}
	switch {
	case os.Geteuid() == 0:
		return onThreadAs(who, func() error { return execAllowed(path) })
	case who.UID == os.Geteuid():
		return execAllowed(path)
	}
	return nil
}

// CheckDirsExec asks CheckDir's question of each of dirs and CheckExec's of path (absolute; ""
// for none) together, in one check on one thread when the process is root: a call needs all the
// answers for the same identity (its workspace, the home it keeps for the uid, its binary), and
// each switch of identity is a hand-off to another thread. dirErrs holds one answer per dir.
func CheckDirsExec(dirs []string, path string, who Who) (dirErrs []error, execErr error) {
	dirErrs = make([]error, len(dirs))
	all := path == "" || filepath.IsAbs(path)
	for _, d := range dirs {
		all = all && filepath.IsAbs(d)
	}
	if !all || os.Geteuid() != 0 {
		for i, d := range dirs {
			dirErrs[i] = CheckDir(d, who)
		}
		if path != "" {
			execErr = CheckExec(path, who)
		}
		return dirErrs, execErr
	}
	err := onThreadAs(who, func() error {
		for i, d := range dirs {
			if dirErrs[i] = isDir(d); dirErrs[i] == nil {
				dirErrs[i] = denied(d, unix.Faccessat2(unix.AT_FDCWD, d, rwx, unix.AT_EACCESS))
			}
		}
		if path != "" {
			execErr = execAllowed(path)
		}
		return nil
	})
	if err != nil { // the thread could not take who's identity: nothing was answered
		for i := range dirErrs {
			dirErrs[i] = err
		}
		if path != "" {
			execErr = err
		}
	}
	return dirErrs, execErr
}

// execAllowed asks the kernel, as the calling thread, whether path may be executed, and when not,
// which directory on its path (as named, then as its links lead) may not be searched.
func execAllowed(path string) error {
	err := unix.Faccessat2(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EACCES) {
		dir := "/"
		for _, name := range splitPath(filepath.Dir(path)) {
			dir = filepath.Join(dir, name)
			if unix.Faccessat2(unix.AT_FDCWD, dir, unix.X_OK, unix.AT_EACCESS) != nil {
				return &DeniedError{Dir: path, Reason: dir + " may not be searched"}
			}
		}
		return &DeniedError{Dir: path, Reason: "not executable for this user"}
	}
	return &DeniedError{Dir: path, Reason: errText(err)}
}

// isDir checks that dir is a directory (as the calling thread sees it).
func isDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrPermission):
		return &DeniedError{Dir: dir, Reason: "a directory on its path may not be searched"}
	case err != nil:
		return &DeniedError{Dir: dir, Reason: "not found: " + errText(err)}
	case !st.IsDir():
		return &DeniedError{Dir: dir, Reason: "not a directory"}
	}
	return nil
}

// denied turns faccessat2's answer into nil or a DeniedError.
func denied(dir string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return &DeniedError{Dir: dir, Reason: "no read, write and search permission"}
	case errors.Is(err, unix.EROFS):
		return &DeniedError{Dir: dir, Reason: "on a read-only file system"}
	}
	return &DeniedError{Dir: dir, Reason: errText(err)}
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// modeBits decides from mode bits alone: search on every directory from / down to dir (following
// symbolic links), read, write and search on dir; any ACL on a directory who does not own denies.
func modeBits(dir string, who Who) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return &DeniedError{Dir: dir, Reason: "cannot be resolved: " + errText(err)}
	}
	path := "/"
	parts := splitPath(real)
	for i := 0; i <= len(parts); i++ {
		if i > 0 {
			path = filepath.Join(path, parts[i-1])
		}
		want := uint32(1) // search
		if i == len(parts) {
			want = 7
		}
		if err := modeAllows(path, who, want); err != nil {
			return &DeniedError{Dir: dir, Reason: err.Error()}
		}
	}
	return nil
}

// splitPath returns the names of a clean absolute path's components.
func splitPath(p string) []string {
	return slices.DeleteFunc(strings.Split(p, "/"), func(s string) bool { return s == "" })
}

// modeAllows checks the permission bits want (4 read, 2 write, 1 search) of path for who.
func modeAllows(path string, who Who, want uint32) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("%s: %s", path, errText(err))
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("%s is not a directory", path)
	}
	owner := int(st.Uid) == who.UID
	if !owner {
		switch _, err := unix.Getxattr(path, "system.posix_acl_access", nil); {
		case err == nil:
			return fmt.Errorf("%s has an access control list: the daemon (not root) cannot evaluate it for uid %d", path, who.UID)
		case !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("%s: reading its access control list: %s", path, errText(err))
		}
	}
	var bits uint32
	switch {
	case owner:
		bits = st.Mode >> 6 & 7
	case int(st.Gid) == who.GID || slices.Contains(who.Groups, int(st.Gid)):
		bits = st.Mode >> 3 & 7
	default:
		bits = st.Mode & 7
	}
	if bits&want != want {
		if want == 1 {
			return fmt.Errorf("%s may not be searched by uid %d", path, who.UID)
		}
		return fmt.Errorf("no read, write and search permission for uid %d", who.UID)
	}
	return nil
}
