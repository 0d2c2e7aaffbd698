package sandbox

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/clihost/clihost/internal/kernfile"
	"golang.org/x/sys/unix"
)

// A watcher lets a Cache skip asking again the lstat and readlink questions of a kept
// compilation (most of its questions, and most of the time a kept policy costs): it holds inotify
// watches on every file those questions asked about and on every folder their paths pass
// through, and the answers cannot have changed while none of them reported an event and the
// mount table reads as it did when the answers were last checked. The kernel queues an event
// before the system call that made the change returns, whoever made it and through whichever
// mount or namespace, so a change made before a call is seen by that call's look.
//
// What inotify does not see is not left to it:
//   - a mount, unmount or remount over a path (no event): the mount table is compared at every
//     look;
//   - a change made on a file system whose changes need not pass through this kernel's VFS (NFS,
//     CIFS, FUSE, 9p, virtiofs, overlayfs's layers, procfs): a compilation that asked about a
//     path on any file system but the local ones of watchableFS is checked question by question,
//     as before;
//   - a file's content (written through a shared mapping, no event), a folder's listing, a git
//     walk's leaves, an environment variable: their questions are always asked again;
//   - a full event queue (IN_Q_OVERFLOW), a watch the kernel dropped (IN_IGNORED), a watch that
//     could not be added (ENOSPC, EACCES): every kept policy, or the one, is checked again.
//
// A policy is taken as valid from the event count read just before its last full check that
// found every answer the same; a change after that read is an event counted after it.
type watcher struct {
	mu       sync.Mutex
	fd       int              // the inotify instance (non-blocking); -1: none (every look is a full check)
	watches  map[int32]bool   // the watches held
	count    uint64           // events read so far
	changed  map[int32]uint64 // a watch → the count at its last event (all ones: the kernel dropped it)
	overflow uint64           // the count at the last queue overflow
	mounts   []byte           // the mount table at the last look
	buf      []byte           // the events' buffer
}

// maxWatches bounds the process's watches (a policy whose questions would need more is checked
// in full at every call); the kernel's own bound is fs.inotify.max_user_watches, per user.
const maxWatches = 4096

// watchMask is what each watch reports: a folder's entries made, removed, renamed or changed
// (owner, mode: IN_ATTRIB reaches a folder's watch for its entries too), and the watched file's
// or folder's own change (link count: IN_ATTRIB reaches only the file's own watch), removal or
// rename.
const watchMask = unix.IN_ATTRIB | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// watchableFS are the file systems whose every change goes through this kernel's VFS, and so
// reaches inotify: local disks and memory.
var watchableFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // ext2, ext3, ext4
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
	unix.F2FS_SUPER_MAGIC:  true,
	unix.RAMFS_MAGIC:       true,
}

// processWatcher is the watcher every Cache of this process shares: one inotify instance (the
// kernel bounds them per user, fs.inotify.max_user_instances, 128 by default), its watches
// dropped by the kernel as the files they watch are removed.
var processWatcher = sync.OnceValue(newWatcher)

// newWatcher returns a watcher; without inotify it has none, and every look is a full check.
func newWatcher() *watcher {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		fd = -1
	}
	return &watcher{fd: fd, watches: map[int32]bool{}, changed: map[int32]uint64{}}
}

// watched is what a kept policy's watches are: the paths its lstat and readlink answers depend
// on, folders first, and, once a full check found every answer the same, the watches it took on
// them, and the event count and mount table it is valid from.
type watched struct {
	ok     bool     // its paths can be watched (see paths); a watch refused clears it
	paths  []string // every path asked about, and every folder above one, folders first
	above  []bool   // paths[i] is only a folder an asked path passes through
	parent []int    // the index of paths[i]'s folder in paths (-1 for /)
	wds    []int32  // paths[i]'s watch, -1 when it was not there; nil until the first take
	taken  uint64   // the count the last take was made after
	tables []byte   // the mount table then (a mount makes no event: after one, all are taken again)
	valid  bool     // a full check found every answer the same at count from, under mounts
	from   uint64
	mounts []byte
}

// paths returns what j's lstat and readlink answers depend on: every path asked about, and every
// folder above it (its parent's entries bind its name; the folders above are passed through),
// folders before what is in them. It reports ok false for a journal whose paths cannot be
// watched (a relative or unclean path); its policy is then always checked in full.
func (w *watcher) paths(j *journal) watched {
	if w.fd < 0 {
		return watched{}
	}
	var paths []string
	above := map[string]bool{} // every folder an asked path passes through
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for i := range j.questions {
		q := &j.questions[i]
		if q.kind != askLstat && q.kind != askReadlink {
			continue
		}
		if !filepath.IsAbs(q.name) || filepath.Clean(q.name) != q.name {
			return watched{}
		}
		for d := q.name; d != "/"; {
			d = filepath.Dir(d)
			above[d] = true
			add(d)
		}
		add(q.name)
	}
	slices.SortStableFunc(paths, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	out := watched{ok: true, paths: paths, above: make([]bool, len(paths)), parent: make([]int, len(paths))}
	index := make(map[string]int, len(paths))
	for i, p := range paths {
		out.above[i] = above[p]
		index[p] = i
		out.parent[i] = -1
		if p != "/" {
			out.parent[i] = index[filepath.Dir(p)] // folders come first: it is there
		}
	}
	return out
}

// take adds k's watches, for a full check about to ask every question, from was read before it;
// it reports false when one cannot be added (a folder above that is a symbolic link, whose
// target's folders would need watches too; another file system than a local one; a watch
// refused, too many): k is then always checked in full.
//
// A watch is on an inode, not a name. Watches are taken at full checks, after the count the check
// will be valid from was read, and folders before what is in them: a name bound to another inode
// when its watch was taken than when its question is asked was bound anew in between, an event of
// the folder above (on the right inode by the same argument, up to /) counted after that count,
// and the next full check takes its watch again. So while no watch saw an event, each is on the
// inode its answer names. Only what may have been bound anew since the last take is taken again
// (most of the cost of a full check otherwise): a path whose folder's watch saw an event since,
// or whose folder was taken again on another inode, a path not there then, a watch the kernel
// dropped; everything after an overflow or a change of the mount table, which was read before
// from (mounts). (The kernel gives a watch an inode already has.)
func (w *watcher) take(k *watched, from uint64, mounts []byte) bool {
	if w.fd < 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !k.ok {
		return false
	}
	all := k.wds == nil || w.overflow > k.taken || mounts == nil || !bytes.Equal(mounts, k.tables)
	if all {
		k.wds = make([]int32, len(k.paths))
	}
	moved := make([]bool, len(k.paths)) // taken again on another inode, or not there
	stirred := func(wd int32) bool { return wd < 0 || w.changed[wd] > k.taken }
	for i, p := range k.paths {
		par := k.parent[i]
		if !all && !stirred(k.wds[i]) && (par < 0 || !moved[par] && !stirred(k.wds[par])) {
			continue
		}
		old := k.wds[i]
		wd, err := w.add(p, k.above[i])
		switch {
		case errors.Is(err, unix.ENOENT):
			// Not there (now): the watch of the folder above sees it made. A question whose
			// answer was that it exists will not be the same: the full check finds it.
			wd = -1
		case err != nil:
			k.ok, k.wds = false, nil
			return false
		}
		k.wds[i], moved[i] = wd, all || wd != old || wd < 0
	}
	k.taken, k.tables = from, mounts
	return true
}

// errLinkAbove is add's answer for a folder above an asked path that is a symbolic link.
var errLinkAbove = errors.New("a folder above an asked path is a symbolic link")

// add watches path p if it is on a file system of watchableFS (the kernel gives the watch an inode
// already has); above says p is only a folder an asked path passes through, which must then be a
// folder (not a link). Called with w.mu held.
func (w *watcher) add(p string, above bool) (int32, error) {
	if above {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return 0, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return 0, errLinkAbove
		}
	}
	if len(w.watches) >= maxWatches {
		return 0, unix.ENOSPC
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(p, &fs); err != nil {
		return 0, err
	}
	if !watchableFS[int64(fs.Type)] {
		return 0, errors.New("not a local file system")
	}
	wd, err := unix.InotifyAddWatch(w.fd, p, watchMask)
	if err != nil {
		return 0, err
	}
	// The statfs above and the watch are not one step: a mount over p in between shows in the
	// mount table, which every look compares.
	w.watches[int32(wd)] = true
	return int32(wd), nil
}

// look reads the events queued since the last look and the mount table, and reports whether k's
// lstat and readlink answers are still those of its last full check (unchanged: they need not be
// asked again), and the count a full check starting now would be valid from.
func (w *watcher) look(k *watched) (unchanged bool, now uint64, mounts []byte) {
	if w.fd < 0 {
		return false, 0, nil
	}
	w.mu.Lock()
	ok := k.ok
	w.mu.Unlock()
	if !ok { // checked in full, without the mount table's read
		return false, 0, nil
	}
	table, err := kernfile.ReadFile("/proc/self/mountinfo")
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil || !k.ok {
		return false, 0, nil
	}
	if !w.drain() {
		w.overflow = w.count
	}
	if !bytes.Equal(table, w.mounts) {
		w.mounts = table
	}
	now, mounts = w.count, w.mounts
	if !k.valid || w.overflow > k.from || !bytes.Equal(k.mounts, mounts) {
		return false, now, mounts
	}
	for _, wd := range k.wds {
		if wd >= 0 && w.changed[wd] > k.from {
			return false, now, mounts
		}
	}
	return true, now, mounts
}

// validate records that a full check that started at count from, under mounts, after its
// watches were taken (taken), found k's answers the same (or, with same false, that they were
// not).
func (w *watcher) validate(k *watched, same, taken bool, from uint64, mounts []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k.valid, k.from, k.mounts = same && taken && k.ok && mounts != nil, from, mounts
}

// drain reads every event queued, counting each against its watch (an overflow against every
// watch). It reports false when the queue could not be read to its end. Called with w.mu held.
func (w *watcher) drain() bool {
	if w.buf == nil {
		w.buf = make([]byte, 64<<10)
	}
	for {
		n, err := unix.Read(w.fd, w.buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return true
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil || n <= 0:
			return false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			w.count++
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				w.overflow = w.count
			case ev.Mask&unix.IN_IGNORED != 0:
				// The file was removed, or its file system unmounted: a kept policy holding this
				// watch is checked in full, and takes its watches anew (a number the kernel may
				// give again after it wrapped around is never trusted).
				w.changed[ev.Wd] = math.MaxUint64
				delete(w.watches, ev.Wd)
			default:
				w.changed[ev.Wd] = w.count
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		if len(w.changed) > 4*maxWatches {
			// The watches of removed files pile up over a long life: forget them all, as after an
			// overflow (every kept policy is checked in full once, and takes its watches anew).
			clear(w.changed)
			w.overflow = w.count
		}
	}
}
