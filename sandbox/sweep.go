package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// fileID identifies a file: its device, inode, birth time and inode generation. Inode numbers are
// reused at once on ext4, and its birth time comes from the coarse clock (a few milliseconds), so
// a directory removed and made again within one tick has the same number and birth time; the
// generation (FS_IOC_GETVERSION, new for every inode ext4 allocates) tells them apart. Fields a
// filesystem does not record are zero.
type fileID struct {
	dev, ino  uint64
	sec, nsec int64
	gen       uint32
}

// fsIocGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long) on 64-bit Linux (x/sys/unix does not
// name it): the inode's generation, which the kernel writes as an int.
const fsIocGetVersion = 0x80087601

// lstatID returns the identity of p itself (not following a final symbolic link).
func lstatID(p string) (fileID, bool) {
	id, err := lstatIDErr(p)
	return id, err == nil
}

// lstatIDErr is lstatID with the statx error.
func lstatIDErr(p string) (fileID, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME|unix.STATX_TYPE, &st); err != nil {
		return fileID{}, err
	}
	id := fileID{dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 {
		id.sec, id.nsec = st.Btime.Sec, int64(st.Btime.Nsec)
	}
	if t := st.Mode & unix.S_IFMT; t == unix.S_IFDIR || t == unix.S_IFREG {
		// Only directories and regular files are opened (never a device or a FIFO), without
		// following a link that replaced it since the statx.
		if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err == nil {
			var st2 unix.Stat_t
			if unix.Fstat(fd, &st2) == nil && st2.Ino == st.Ino {
				if g, err := unix.IoctlGetUint32(fd, fsIocGetVersion); err == nil {
					id.gen = g
				}
			}
			unix.Close(fd)
		}
	}
	return id, nil
}

// takeState records the state of the file system before the call that Sweep compares with after
// it: which deny paths inside a writable root exist (Absent, present) and the writable roots'
// identities (roots). Each call takes its own, also when its policy is a Cache's.
func (p *Policy) takeState() {
	p.Absent, p.present = denyStates(p.Deny, p.Writable)
	p.roots = rootIDs(p.Writable)
}

// denyStates splits the deny paths that lie strictly inside one of the writable roots into those
// that do not exist now (absent: swept after the call) and the identities of those that do
// (present: masked, and swept if another file stands there after the call), from one look at
// each path: two looks let a path that came and went between them be in neither list, neither
// masked nor swept.
func denyStates(deny, writable []string) (absent []string, present map[string]fileID) {
	present = map[string]fileID{}
	for _, d := range deny {
		if root := writableRoot(d, writable); root == "" || root == d {
			continue
		}
		id, err := lstatIDErr(d)
		switch {
		case err == nil:
			present[d] = id
		case errors.Is(err, unix.ENOENT):
			absent = append(absent, d)
		}
	}
	return absent, present
}

// writableRoot returns the writable root p lies in, or "".
func writableRoot(p string, writable []string) string {
	for _, w := range writable {
		if within(p, w) {
			return w
		}
	}
	return ""
}

// gitControlNames are the absent deny paths in a .git directory that the git check judges by
// content (see SnapshotGit) instead of removing them: a repository the call made keeps its config
// and sample hooks.
var gitControlNames = []string{"hooks", "config", "config.worktree"}

// replaced returns the deny paths inside writable roots that existed at Compile and are another
// file now: removed while the call ran (a mask in the sandbox goes with the mount point when
// another process removes it on the host) and created again, possibly by the call, unmasked.
func (p *Policy) replaced() []string {
	var out []string
	for _, d := range slices.Sorted(maps.Keys(p.present)) {
		if id, ok := lstatID(d); ok && id != p.present[d] {
			out = append(out, d)
		}
	}
	return out
}

// Sweep runs after a call's processes have all exited. It removes whatever the call created at
// p.Absent: deny paths inside writable roots (editor task files, and, when the policy has no git
// snapshot, a git hook directory or config) that the kernel could not mask because they did not
// exist yet, and that the user's own tools would otherwise run later, outside the sandbox; and
// whatever now stands at such a deny path that existed at Compile but is another file now (see
// replaced). When
// SnapshotGit ran before the call, it then applies the git rule (see gitguard.go) and returns what
// it neutralised. The removed paths and the findings are for warnings in the call's result.
//
// Each removal happens through an os.Root opened on the writable root, so a symbolic link the
// program planted on the way (ws/bare → /home/user/repo) can never make it remove anything outside
// that root; and the root is opened without following symbolic links and must be the directory
// Compile saw, so that the workspace's owner cannot swap the workspace itself for a link to
// another user's project before Sweep (which a root daemon runs as root) removes in it.
func Sweep(p *Policy) (removed []string, git []GitFinding, err error) {
	var errs []error
	for _, a := range slices.Concat(p.Absent, p.replaced()) {
		if p.git != nil && filepath.Base(filepath.Dir(a)) == ".git" && slices.Contains(gitControlNames, filepath.Base(a)) {
			continue
		}
		w := writableRoot(a, p.Writable)
		if w == "" {
			continue
		}
		rel, err := filepath.Rel(w, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		root, err := p.openRoot(w)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", w, err))
			continue
		}
		if _, err := root.Lstat(rel); err == nil {
			if err := root.RemoveAll(rel); err != nil {
				errs = append(errs, fmt.Errorf("sweep %s: %w", a, err))
			} else {
				removed = append(removed, a)
			}
		}
		root.Close()
	}
	if p.git != nil {
		found, err := p.checkGit()
		git = found
		errs = append(errs, err)
	}
	return removed, git, errors.Join(errs...)
}

// rootIDs returns the identities of the writable roots that are directories now.
func rootIDs(writable []string) map[string]fileID {
	out := map[string]fileID{}
	for _, w := range writable {
		if id, ok := lstatID(w); ok {
			out[w] = id
		}
	}
	return out
}

// openRoot opens the writable root w for Sweep: resolved without any symbolic link (Compile
// resolved them all) and the very directory Compile recorded, else an error saying it changed.
func (p *Policy) openRoot(w string) (*os.Root, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, w, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, fmt.Errorf("the writable root changed after the policy check (it no longer leads to a directory without symbolic links): %w", err)
	}
	defer unix.Close(fd)
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return nil, err
	}
	id := fileID{dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 {
		id.sec, id.nsec = st.Btime.Sec, int64(st.Btime.Nsec)
	}
	if dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		if g, err := unix.IoctlGetUint32(dfd, fsIocGetVersion); err == nil {
			id.gen = g
		}
		unix.Close(dfd)
	}
	if want, ok := p.roots[w]; !ok || want != id {
		return nil, errors.New("the writable root changed after the policy check (another directory stands at its path now): nothing removed in it")
	}
	// The descriptor's own directory, whatever its path names by now.
	return os.OpenRoot("/proc/self/fd/" + strconv.Itoa(fd))
}
