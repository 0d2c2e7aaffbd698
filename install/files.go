package install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often lockKey retries a lock another process holds.
const lockPoll = 100 * time.Millisecond

// lockKey takes the bundle's exclusive lock file in binRoot, waiting while another process holds
// it (until ctx ends). The returned function releases it.
func lockKey(ctx context.Context, binRoot, key string) (func(), error) {
	name := filepath.Join(binRoot, "."+key+".lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return func() { f.Close() }, nil // closing the file releases the lock
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process installing %s (lock %s): %w", key, name, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// tempPrefix starts the names of an install's temporary directories in <StateDir>/bin.
func tempPrefix(key string) string { return ".tmp-" + key + "-" }

// tempDir makes a new temporary directory for one install attempt, next to BinDir so that renames
// from it into BinDir stay on one file system.
func (in *installer) tempDir() (string, error) {
	dir, err := os.MkdirTemp(filepath.Join(in.o.StateDir, "bin"), tempPrefix(in.key))
	if err != nil {
		return "", fmt.Errorf("temporary directory: %w", err)
	}
	return dir, nil
}

// cleanLeftovers removes the temporary directories of this bundle's interrupted installs. The
// caller holds the bundle's lock, so none of them belongs to a running install.
func (in *installer) cleanLeftovers(binRoot string) {
	entries, err := os.ReadDir(binRoot)
	if err != nil {
		in.log.Warn("cannot list the state directory for leftovers", "dir", binRoot, "err", err)
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix(in.key)) {
			continue
		}
		p := filepath.Join(binRoot, e.Name())
		if err := os.RemoveAll(p); err != nil {
			in.log.Warn("cannot remove an interrupted install's leftovers", "path", p, "err", err)
			continue
		}
		in.log.Info("removed an interrupted install's leftovers", "bundle", in.key, "path", p)
	}
}

// RemoveInterrupted removes, in the state directory stateDir, the temporary directories of
// installs that were interrupted by the end of their process (a daemon killed with SIGKILL during a
// download leaves the part it had downloaded): those of each bundle whose lock no install holds
// now. The next install of a bundle removes its own too; this covers the bundles never installed
// again. It returns the directories removed; clihostd calls it at start.
func RemoveInterrupted(stateDir string) ([]string, error) {
	binRoot := filepath.Join(stateDir, "bin")
	entries, err := os.ReadDir(binRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byKey := map[string][]string{}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), ".tmp-")
		i := strings.LastIndexByte(rest, '-') // a key may hold '-', MkdirTemp's random suffix not
		if !ok || i <= 0 || !e.IsDir() {
			continue
		}
		key := rest[:i]
		byKey[key] = append(byKey[key], filepath.Join(binRoot, e.Name()))
	}
	once, cancel := context.WithCancel(context.Background())
	cancel() // lockKey tries once: a held lock is a running install's
	var removed []string
	var errs []error
	for key, dirs := range byKey {
		unlock, err := lockKey(once, binRoot, key)
		if err != nil {
			continue
		}
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, d)
		}
		unlock()
	}
	return removed, errors.Join(errs...)
}

// place makes src (a complete file in one of the bundle's temporary directories) executable,
// flushes it to disk and renames it to BinDir/<bin>, replacing any previous binary in one step.
// The previous binary is held across the rename (holdReplaced) and freed once the install is done
// (releaseReplaced), so that no install waits for the file system to free its blocks.
func (in *installer) place(src string) (string, error) {
	if err := os.Chmod(src, 0o755); err != nil {
		return "", fmt.Errorf("place binary: %w", err)
	}
	if err := awaitNoWriters(src); err != nil {
		return "", fmt.Errorf("place binary: %w", err)
	}
	if err := syncPath(src); err != nil {
		return "", fmt.Errorf("place binary: %w", err)
	}
	dir := BinDir(in.o.StateDir, in.key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("place binary: %w", err)
	}
	dst := filepath.Join(dir, in.binName())
	if fd := holdReplaced(dir, dst); fd >= 0 {
		in.replaced = append(in.replaced, fd)
	}
	if err := os.Rename(src, dst); err != nil {
		return "", fmt.Errorf("place binary: %w", err)
	}
	if err := syncPath(dir); err != nil {
		return "", fmt.Errorf("place binary: %w", err)
	}
	return dst, nil
}

// freeReplaced closes a descriptor holdReplaced returned: the last reference to the replaced
// binary gone, the file system frees its blocks.
var freeReplaced = unix.Close

// releaseReplaced frees the binaries place replaced during the install, each on a goroutine of its
// own, so the caller does not wait for it. run calls it last: after the entry's temporary
// directory is removed, whose own small free would otherwise queue behind this one's (on ext4 with
// online discard, freeing 64 MiB waits about 10 ms for the device to discard it).
func (in *installer) releaseReplaced() {
	for _, fd := range in.replaced {
		go freeReplaced(fd)
	}
	in.replaced = nil
}

// holdReplaced opens the binary at dst, if there is one, so that its inode outlives the rename
// that replaces it: the rename then only unlinks it, and its blocks are freed when freeReplaced
// closes the descriptor. O_PATH opens nothing (a FIFO or device planted there is not opened, a
// symlink is held itself, not followed). It returns -1 when there is nothing to hold, and on file
// systems that might keep an unlinked open file under a visible name a crash would leave behind
// (NFS's .nfs*, FUSE's .fuse_hidden*): only those in localFileSystem are held, where the kernel
// frees the inode at the last close, at a crash the process's exit, and after a power cut the
// next mount's orphan recovery (ext4 without a journal leaves that to fsck, as it leaves all its
// metadata after a power cut). The rename goes ahead either way.
func holdReplaced(dir, dst string) int {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || !localFileSystem(uint32(st.Type)) {
		return -1
	}
	fd, err := unix.Open(dst, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1 // nothing there, or nothing to hold: the rename frees it, as it always did
	}
	return fd
}

// localFileSystem reports whether the file system with magic number magic (statfs) is one of the
// local ones whose behaviour place relies on: it frees an unlinked inode at its last close and,
// after a crash, when it is next mounted, leaving no name (holdReplaced); and it refuses a read
// lease exactly while the file is open for writing (awaitNoWriters).
func localFileSystem(magic uint32) bool {
	switch magic {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC:
		return true
	}
	return false
}

// writersWait bounds how long awaitNoWriters waits.
var writersWait = 5 * time.Second

// awaitNoWriters waits until no process holds the file at path open for writing, at most
// writersWait. A process this one forks while the file is open for writing (a sandbox's init, a
// git run for another call) holds a copy of the descriptor until its own exec, and until then
// the file cannot be executed: ETXTBSY, "text file busy" (golang.org/issue/22315). On a local file
// system the kernel refuses a read lease (EAGAIN) exactly while the file is open for writing, even
// with fs.leases-enable=0. Elsewhere EAGAIN says nothing of writers (NFSv4 without a delegation,
// SMB without an oplock), and it does not wait; nor where no lease may be taken (EACCES, EINVAL).
func awaitNoWriters(path string) error {
	deadline := time.Now().Add(writersWait)
	var fd int
	// O_NONBLOCK: an open that would break another process's lease fails at once (EWOULDBLOCK)
	// instead of waiting for it (fs.lease-break-time, 45 s).
	err := retryWhileBusy(deadline, func() (err error) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err == nil {
		defer unix.Close(fd)
		var st unix.Statfs_t
		if unix.Fstatfs(fd, &st) != nil || !localFileSystem(uint32(st.Type)) {
			return nil // a lease there does not tell whether the file is open for writing
		}
		err = retryWhileBusy(deadline, func() error {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
			return err
		})
		if err == nil {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
			return nil
		}
		if !errors.Is(err, unix.EAGAIN) {
			return nil // no lease may be taken here: nothing to wait with
		}
	}
	if errors.Is(err, unix.EAGAIN) { // EWOULDBLOCK too
		return fmt.Errorf("%s is still open for writing, or leased, in another process after %v: it could not be executed", path, writersWait)
	}
	return err
}

// retryWhileBusy calls try until it returns anything but EAGAIN (EWOULDBLOCK), or deadline has
// passed, pausing a little longer each time, and returns its last error.
func retryWhileBusy(deadline time.Time, try func() error) error {
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		if err := try(); !errors.Is(err, unix.EAGAIN) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// syncPath fsyncs a file or directory. Its open does not wait for another process's lease on the
// file (O_NONBLOCK: it fails instead).
func syncPath(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	return nil
}

// isExecutable reports whether p is (or links to) a regular file with an execute bit.
func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// pathDirs is the host's PATH, absolute entries only: a relative entry would resolve against
// clihost's working directory, not a fixed place.
func (in *installer) pathDirs() []string {
	v, _ := in.o.LookupEnv("PATH")
	var dirs []string
	for _, d := range filepath.SplitList(v) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// lookPath finds an executable named one of names on the host's PATH: the first PATH directory
// holding one wins, names in order within a directory.
func (in *installer) lookPath(names ...string) (string, error) {
	for _, d := range in.pathDirs() {
		for _, name := range names {
			if p := filepath.Join(d, name); isExecutable(p) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("skipped: %s not found on PATH", strings.Join(names, " or "))
}

// findBin looks for the bundle's bin in dirs, then on the host's PATH (an absolute bin is checked
// where it is).
func (in *installer) findBin(dirs ...string) (string, error) {
	bin := in.b.CLI.Bin
	if filepath.IsAbs(bin) {
		if isExecutable(bin) {
			return bin, nil
		}
		return "", fmt.Errorf("%s is not an executable file after the install", bin)
	}
	for _, d := range append(dirs, in.pathDirs()...) {
		if p := filepath.Join(d, in.binName()); isExecutable(p) {
			return p, nil
		}
	}
	where := "on PATH"
	if len(dirs) > 0 {
		where = "in " + strings.Join(dirs, ", ") + " or on PATH"
	}
	return "", fmt.Errorf("the install finished but %s is not %s", in.binName(), where)
}
