package nsinit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// The plan's paths are resolved once, by the init, before it mounts anything: each one is opened
// as an O_PATH descriptor with openat2(RESOLVE_NO_SYMLINKS), and from then on the init works on
// those descriptors only. The bind mounts are clones of them (open_tree on the descriptor), the
// Landlock rules are taken from them, the directories split around deny paths are read through
// them, and every mount target is resolved without symbolic links and must be the very file the
// descriptor names. The policy check (sandbox.Compile) resolved every symbolic link already, so a
// symbolic link met here means the tree changed after the check: the sandbox is refused. Without
// this, a concurrent writer of the workspace could swap a granted directory for a symbolic link
// between the check and the mounts, and the grant would land on the link's target.

// maskDirKey and maskFileKey are the pathTable keys of the two mask inodes (see maskDenied).
const (
	maskDirKey  = "\x00mask dir"
	maskFileKey = "\x00mask file"
)

// pathTable holds the descriptors the init resolved: O_PATH descriptors by path (plan paths, the
// entries of split directories, the sandbox's own paths, the masks), each with its stat.
type pathTable struct {
	fds map[string]int
	st  map[string]unix.Stat_t
	// With keepSplit, split keeps a descriptor of every directory whose entries were listed to
	// split a Landlock grant (splitGrant), with its stat from before the listing, for a sandbox
	// built ahead (aheadSandbox); close leaves them open, closeSplit closes them.
	keepSplit bool
	split     []splitDir
}

// splitDir is a directory listed to split a Landlock grant: its pathTable key, a descriptor, its
// stat from before the listing, and the names listed.
type splitDir struct {
	key   string
	fd    int
	st    unix.Stat_t
	names []string
}

// closeSplit closes the descriptors of *dirs and empties it.
func closeSplit(dirs *[]splitDir) {
	for _, d := range *dirs {
		unix.Close(d.fd)
	}
	*dirs = nil
}

func newPathTable() *pathTable {
	return &pathTable{fds: map[string]int{}, st: map[string]unix.Stat_t{}}
}

// add records fd for path and takes ownership of it; when path has a descriptor already, fd is
// closed and the first one stays.
func (t *pathTable) add(path string, fd int) error {
	if _, ok := t.fds[path]; ok {
		unix.Close(fd)
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fmt.Errorf("stat %s: %w", path, err)
	}
	t.fds[path], t.st[path] = fd, st
	return nil
}

// fd returns the descriptor of path, if it was resolved.
func (t *pathTable) fd(path string) (int, bool) {
	fd, ok := t.fds[path]
	return fd, ok
}

// isDir reports whether path was resolved to a directory.
func (t *pathTable) isDir(path string) bool {
	st, ok := t.st[path]
	return ok && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// close closes every descriptor.
func (t *pathTable) close() {
	for _, fd := range t.fds {
		unix.Close(fd)
	}
	clear(t.fds)
	clear(t.st)
}

// openNoSymlinks opens path (absolute) as an O_PATH descriptor, refusing a symbolic link anywhere in
// it but the last component, which is returned as a link when it is one.
func openNoSymlinks(path string) (int, error) {
	return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// openBeneath opens the entry name of the directory dirfd as an O_PATH descriptor, without
// following symbolic links and without leaving the directory.
func openBeneath(dirfd int, name string) (int, error) {
	return unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// changedError is the error of a path whose resolution found the tree changed after the check.
func changedError(path, what string) error {
	return fmt.Errorf("%s: %s after the policy check: the tree changed, refusing to build the sandbox", path, what)
}

// openPlan resolves every path of p once, in the host's view (before any mount): ReadOnly,
// ReadWrite, Exec and Protect paths must contain no symbolic link at all; a Deny path may be one
// itself (its link is masked) but its parents may not. Paths that do not exist are left out, but
// a ReadWrite root that does not exist is an error (there is nothing to bind), and so is a Deny
// path inside a ReadWrite root that existed at the check (it is not in Absent): removed since, it
// could be created unmasked, and the host would not sweep it.
func openPlan(p isolation.Plan) (*pathTable, error) {
	t := newPathTable()
	for i, list := range pathLists(&p) {
		for _, path := range *list {
			fd, err := openNoSymlinks(path)
			switch {
			case errors.Is(err, unix.ENOENT) && pathListNames[i] == "Deny" && removedDeny(p, path):
				t.close()
				return nil, changedError(path, "the deny path was removed")
			case errors.Is(err, unix.ENOENT) && pathListNames[i] != "ReadWrite":
				continue
			case errors.Is(err, unix.ELOOP):
				t.close()
				return nil, changedError(path, "a symbolic link appeared in the path")
			case err != nil:
				t.close()
				return nil, fmt.Errorf("%s %s: %w", pathListNames[i], path, err)
			}
			if err := t.add(path, fd); err != nil {
				t.close()
				return nil, err
			}
			if pathListNames[i] != "Deny" && t.st[path].Mode&unix.S_IFMT == unix.S_IFLNK {
				t.close()
				return nil, changedError(path, "the path became a symbolic link")
			}
		}
	}
	return t, nil
}

// removedDeny reports whether the missing Deny path lies inside a ReadWrite root and existed when
// the policy was checked (it is not in p.Absent).
func removedDeny(p isolation.Plan, path string) bool {
	_, writable := coveringPath(path, p.ReadWrite)
	return writable && !slices.Contains(p.Absent, path)
}

// sameFile reports whether a and b are the same inode.
func sameFile(a, b *unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }

// openTarget resolves path in the sandbox's current view, without symbolic links, for a mount to
// be attached on it. When want is set, the target must be that very file (the one resolved before
// the mounts). A missing target comes back as ENOENT.
func openTarget(path string, want *unix.Stat_t) (int, error) {
	fd, err := openNoSymlinks(path)
	if errors.Is(err, unix.ELOOP) {
		return -1, changedError(path, "a symbolic link appeared in the path")
	}
	if err != nil {
		return -1, err
	}
	if want != nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if !sameFile(&st, want) {
			unix.Close(fd)
			return -1, changedError(path, "the path names another file")
		}
	}
	return fd, nil
}

// makeTarget creates the mountpoint path (a directory, or an empty file unless dir) and its missing
// parents in the sandbox's private /tmp, whose root device is tmpDev, and returns it opened.
// Nothing is created anywhere else: a missing component outside that tmpfs (inside a host tree
// bound there) means the host tree changed.
func makeTarget(path string, dir bool, tmpDev uint64) (int, error) {
	cur, err := openNoSymlinks("/tmp")
	if err != nil {
		return -1, err
	}
	rest := strings.Split(strings.TrimPrefix(path, "/tmp/"), "/")
	for i, name := range rest {
		last := i == len(rest)-1
		next, err := openBeneath(cur, name)
		if errors.Is(err, unix.ENOENT) {
			next, err = createIn(cur, name, dir || !last, tmpDev)
		}
		unix.Close(cur)
		if errors.Is(err, unix.ELOOP) {
			return -1, changedError(path, "a symbolic link appeared in the path")
		}
		if err != nil {
			return -1, fmt.Errorf("mountpoint %s: %w", path, err)
		}
		cur = next
	}
	return cur, nil
}

// createIn creates the directory (or empty file) name in the directory dirfd, which must lie on the
// device tmpDev, and returns it opened.
func createIn(dirfd int, name string, dir bool, tmpDev uint64) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return -1, err
	}
	if st.Dev != tmpDev {
		return -1, fmt.Errorf("%s is missing from a host tree: %w", name, os.ErrNotExist)
	}
	if dir {
		if err := unix.Mkdirat(dirfd, name, 0o755); err != nil {
			return -1, err
		}
	} else {
		fd, err := unix.Openat(dirfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return -1, err
		}
		unix.Close(fd)
	}
	return openBeneath(dirfd, name)
}

// attachAt moves the detached mount mfd onto the file targetfd.
func attachAt(mfd, targetfd int) error {
	return unix.MoveMount(mfd, "", targetfd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// cloneAt returns a detached recursive clone of the tree at the descriptor fd.
func cloneAt(fd int) (int, error) {
	return unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|openTreeCloexec|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
}
