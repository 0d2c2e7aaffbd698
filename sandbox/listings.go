package sandbox

import (
	"errors"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The git rule reads every folder of every writable root before a call and again after it (see
// gitguard.go); in a project those reads are most of a call's time. A folder's entries change only
// by operations that also set its change time (ctime) to the current time — creating, removing,
// renaming or linking an entry in it, and chmod, chown or utimes on the folder — and no program can
// set a ctime of its choosing. So the names and types a walk read are kept, by the folder's mount,
// device and inode (listingKey), and the next walk uses them instead of reading the folder again as
// long as its ctime is the same, to the nanosecond. Only a listing whose folder's ctime was older
// than the start of the read by more than listingMargin is kept: a change made in the same clock
// tick as an earlier one (or the same second, on a file system that stores seconds) may leave the
// ctime as it was, and the margin makes sure no such change can follow a kept listing; the cache
// is emptied when the wall clock is set back by more than half of it (checkClock). Only folders on local file systems
// whose ctime the kernel itself sets are kept (stampedLocally). What is in the files (a .git
// gitfile, a config, a hook) is read again by every walk: only which names a folder holds is kept.

// listingMargin is how much older than the read a folder's ctime must be for its listing to be
// kept: more than a file system's timestamp granularity (a second on some) and the clock tick.
var listingMargin = 2 * time.Second

// maxKeptBytes bounds the memory the kept listings hold, all folders together (see cost): a folder
// costs its map slot even when empty, and a name up to 255 bytes.
const maxKeptBytes = 16 << 20

// Estimated sizes for maxKeptBytes: a kept folder's map slot (key, listing and the map's share),
// and an entry besides its name.
const (
	keptFolderBytes = int(unsafe.Sizeof(listingKey{})+unsafe.Sizeof(listing{})) + 16
	keptEntryBytes  = int(unsafe.Sizeof(dirEntry{}))
)

// dirEntry is a folder entry as a walk uses it: its name and type bits.
type dirEntry struct {
	name string
	typ  os.FileMode
}

// listingKey is the folder a kept listing is of: its mount (the mount's unique id, which the
// system never gives another mount while it runs), device and inode. A file system mounted again
// gets a new mount id, so what was done to it while it was not mounted (written offline, an image
// edited) cannot hide behind a folder's old device, inode and ctime.
type listingKey struct{ mnt, dev, ino uint64 }

type listing struct {
	ctime   unix.Timespec
	entries []dirEntry
}

// folderState is what a kept listing is checked against: the folder's key and ctime, and whether
// it is a folder.
type folderState struct {
	key   listingKey
	ctime unix.Timespec
	dir   bool
}

// statFolder returns the state of the file name in the folder open at dirfd (flags as statx's:
// AT_EMPTY_PATH for dirfd itself, AT_SYMLINK_NOFOLLOW), false when it cannot be had, the mount's
// unique id included (a kernel before 6.8 has none: no listing is kept there).
func statFolder(dirfd int, name string, flags int) (folderState, bool) {
	var stx unix.Statx_t
	const want = unix.STATX_TYPE | unix.STATX_INO | unix.STATX_CTIME | unix.STATX_MNT_ID_UNIQUE
	if unix.Statx(dirfd, name, flags|unix.AT_STATX_SYNC_AS_STAT, want, &stx) != nil || stx.Mask&want != want {
		return folderState{}, false
	}
	return folderState{
		key:   listingKey{mnt: stx.Mnt_id, dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino},
		ctime: unix.Timespec{Sec: stx.Ctime.Sec, Nsec: int64(stx.Ctime.Nsec)},
		dir:   stx.Mode&unix.S_IFMT == unix.S_IFDIR,
	}, true
}

// listingCache keeps folder listings between walks (see above). Safe for concurrent use; a kept
// slice is never changed.
type listingCache struct {
	mu    sync.Mutex
	byDir map[listingKey]listing
	bytes int           // cost of what byDir holds
	skew  time.Duration // the highest clockSkew since byDir was emptied (see checkClock)
	hits  atomic.Int64  // listings used instead of a read (for tests)
}

// clockRef is a reading of both clocks clockSkew compares.
var clockRef = time.Now()

// clockSkew returns how far the wall clock, which stamps ctimes, has moved from the monotonic one
// since clockRef: it drops when the wall clock is set back, and no slewing moves it. A variable
// for tests, which cannot set the machine's clock.
var clockSkew = func() time.Duration {
	now := time.Now()
	return now.Round(0).Sub(clockRef.Round(0)) - now.Sub(clockRef)
}

// listings is the process's cache: every call's walks share it.
var listings = &listingCache{byDir: map[listingKey]listing{}}

// get returns the kept entries of the folder st describes, when its ctime is the one they were read
// at.
func (c *listingCache) get(st folderState) ([]dirEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkClock()
	l, ok := c.byDir[st.key]
	if !ok || l.ctime != st.ctime {
		return nil, false
	}
	c.hits.Add(1)
	return l.entries, true
}

// offer keeps entries, read from the folder open at fd starting at start, when the folder's ctime
// (before, from before the read) was older than start by more than listingMargin, did not change
// during the read, and its file system stamps ctimes itself.
func (c *listingCache) offer(fd int, before folderState, start time.Time, entries []dirEntry) {
	if !oldEnough(before.ctime, start) {
		return
	}
	if after, ok := statFolder(fd, "", unix.AT_EMPTY_PATH); !ok || after != before {
		return
	}
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil || !stampedLocally(int64(fs.Type)) {
		return
	}
	c.keep(before.key, before.ctime, entries)
}

// keep keeps entries as the listing of the folder key at ctime.
func (c *listingCache) keep(key listingKey, ctime unix.Timespec, entries []dirEntry) {
	n := cost(entries)
	if n > maxKeptBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkClock()
	if old, ok := c.byDir[key]; ok {
		c.bytes -= cost(old.entries)
	}
	if c.bytes+n > maxKeptBytes {
		c.byDir = map[listingKey]listing{} // the next walks fill it again; clear would keep its size
		c.bytes = 0
	}
	c.byDir[key] = listing{ctime: ctime, entries: entries}
	c.bytes += n
}

// checkClock empties the cache when the wall clock was set back by more than half listingMargin
// since what it holds was kept (c.mu held): the clock then passes again through ctimes listings
// were kept at, and a change could be stamped with one. A smaller step cannot: a listing's ctime
// is older than its read by the margin.
func (c *listingCache) checkClock() {
	skew := clockSkew()
	switch {
	case skew > c.skew || len(c.byDir) == 0:
		c.skew = skew
	case c.skew-skew > listingMargin/2:
		c.byDir = map[listingKey]listing{}
		c.bytes = 0
		c.skew = skew
	}
}

// cost estimates the memory a kept listing of entries holds (see maxKeptBytes).
func cost(entries []dirEntry) int {
	n := keptFolderBytes
	for _, e := range entries {
		n += keptEntryBytes + len(e.name)
	}
	return n
}

// oldEnough reports whether a folder's ctime is old enough, at a read started at start, for its
// listing to be kept (see listingMargin). The largest 32-bit second never is: a file system that
// stores 32-bit seconds stamps every change after 2038-01-19 with it.
func oldEnough(ctime unix.Timespec, start time.Time) bool {
	return ctime.Sec < math.MaxInt32 && time.Unix(ctime.Unix()).Before(start.Add(-listingMargin))
}

// stampedLocally reports whether a file system of this type (statfs f_type) is local, has the
// kernel set its ctimes and gives no folder the device, inode and ctime of another with other
// entries: ext4, xfs, tmpfs. A network or FUSE file system reports what its server says, possibly
// from a cache; overlayfs shows the layers' times. Btrfs does not qualify: a snapshot, which the
// owner of a subvolume may take, copies folders with their inode numbers and ctimes, and a new
// subvolume gets the st_dev a removed one freed, so a call can put a folder of other entries
// under a kept listing's key and ctime (TestKeptListingsBtrfsSnapshots).
func stampedLocally(fsType int64) bool {
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

// readEntries returns the entries of the folder open as f (fd): those a walk kept, when the folder
// has not changed since (see listings), or else read now, a batch at a time, and offered to be
// kept. spend is told how many entries each batch (or the kept listing) holds; an error from it
// ends the read and is returned. After a read error, the entries read before it are returned with
// the error.
func readEntries(f *os.File, fd int, spend func(n int) error) ([]dirEntry, error) {
	before, stated := statFolder(fd, "", unix.AT_EMPTY_PATH)
	if stated {
		if kept, ok := listings.get(before); ok {
			if err := spend(len(kept)); err != nil {
				return nil, err
			}
			return kept, nil
		}
	}
	start := time.Now()
	var out []dirEntry
	for {
		batch, err := f.ReadDir(1024)
		if err := spend(len(batch)); err != nil {
			return nil, err
		}
		for _, e := range batch {
			out = append(out, dirEntry{name: e.Name(), typ: e.Type()})
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
	}
	if stated {
		listings.offer(fd, before, start, out)
	}
	return out, nil
}

// keptLeaf returns how many entries the folder st describes holds, when its kept listing is still
// good (see listings), it holds no folder and acts reports none of its entries as one a walk acts
// on: a walk needs nothing more of such a folder than that count, and does not open it.
func keptLeaf(st folderState, acts func(name string) bool) (n int, ok bool) {
	if !st.dir {
		return 0, false
	}
	kept, ok := listings.get(st)
	if !ok {
		return 0, false
	}
	for _, e := range kept {
		if e.typ&os.ModeDir != 0 || acts(e.name) {
			return 0, false
		}
	}
	return len(kept), true
}
