package sandbox

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listingOps are the ways a process confined to a folder can change the entries of the folder at
// d (on the same file system, sibling folder e for moves across folders). Each is applied to a
// folder whose listing was kept, and its times are set back after.
var listingOps = []struct {
	name string
	op   func(d, e string) error
}{
	{"create", func(d, _ string) error { return os.WriteFile(filepath.Join(d, ".git"), []byte("gitdir: /x\n"), 0o644) }},
	{"mkdir", func(d, _ string) error { return os.Mkdir(filepath.Join(d, ".git"), 0o755) }},
	{"unlink", func(d, _ string) error { return os.Remove(filepath.Join(d, "f")) }},
	{"rmdir", func(d, _ string) error { return os.Remove(filepath.Join(d, "sub")) }},
	{"rename-within", func(d, _ string) error { return os.Rename(filepath.Join(d, "f"), filepath.Join(d, ".git")) }},
	{"rename-in", func(d, e string) error { return os.Rename(filepath.Join(e, "g"), filepath.Join(d, ".git")) }},
	{"rename-out", func(d, e string) error { return os.Rename(filepath.Join(d, "sub"), filepath.Join(e, "moved")) }},
	{"rename-over-other-type", func(d, e string) error {
		return os.Rename(filepath.Join(e, "link"), filepath.Join(d, "f")) // a symlink over a file
	}},
	{"exchange-within", func(d, _ string) error {
		return unix.Renameat2(unix.AT_FDCWD, filepath.Join(d, "f"), unix.AT_FDCWD, filepath.Join(d, "sub"), unix.RENAME_EXCHANGE)
	}},
	{"exchange-across", func(d, e string) error {
		return unix.Renameat2(unix.AT_FDCWD, filepath.Join(d, "f"), unix.AT_FDCWD, filepath.Join(e, "g"), unix.RENAME_EXCHANGE)
	}},
	{"noreplace-in", func(d, e string) error {
		return unix.Renameat2(unix.AT_FDCWD, filepath.Join(e, "g"), unix.AT_FDCWD, filepath.Join(d, ".git"), unix.RENAME_NOREPLACE)
	}},
	{"whiteout", func(d, e string) error {
		return unix.Renameat2(unix.AT_FDCWD, filepath.Join(d, "f"), unix.AT_FDCWD, filepath.Join(e, "out"), unix.RENAME_WHITEOUT)
	}},
	{"link", func(d, e string) error { return os.Link(filepath.Join(e, "file"), filepath.Join(d, ".git")) }},
	{"symlink", func(d, _ string) error { return os.Symlink("/tmp", filepath.Join(d, ".git")) }},
	{"fifo", func(d, _ string) error { return unix.Mkfifo(filepath.Join(d, ".git"), 0o644) }},
	{"socket", func(d, _ string) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(d, ".git")})
	}},
	{"tmpfile-linkat", func(d, _ string) error {
		fd, err := unix.Open(d, unix.O_TMPFILE|unix.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, filepath.Join(d, ".git"), unix.AT_SYMLINK_FOLLOW)
	}},
	{"removed-and-made-again", func(d, _ string) error {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		return os.MkdirAll(filepath.Join(d, ".git/hooks"), 0o755)
	}},
}

// listed reads the folder at d through readEntries (kept listings included), sorted by name.
func listed(t *testing.T, d string) []dirEntry {
	t.Helper()
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), d)
	defer f.Close()
	got, err := readEntries(f, fd, func(int) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	got = slices.Clone(got)
	slices.SortFunc(got, func(a, b dirEntry) int { return strings.Compare(a.name, b.name) })
	return got
}

// actual reads the folder at d afresh, sorted by name.
func actual(t *testing.T, d string) []dirEntry {
	t.Helper()
	es, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []dirEntry
	for _, e := range es {
		out = append(out, dirEntry{e.Name(), e.Type()})
	}
	return out
}

// TestKeptListingsSeeEveryEntryChange attacks the kept listings on each local file system type
// this machine has (the temporary directory's, /dev/shm, a tmpfs, and as root an XFS made for
// the test): every way a process can
// change a folder's entries (listingOps), with the folder's times set back after, must make the
// next read see the folder as it is. It fails if no kept listing was used at all.
func TestKeptListingsSeeEveryEntryChange(t *testing.T) {
	bases := map[string]string{"tempdir": realTemp(t)}
	if shm, err := os.MkdirTemp("/dev/shm", "listings"); err == nil {
		t.Cleanup(func() { os.RemoveAll(shm) })
		bases["tmpfs"] = shm
	}
	if os.Geteuid() == 0 {
		bases["xfs"] = loopMount(t, "xfs", 300<<20)
	}
	type target struct {
		fs, op, d string
		do        func(d, e string) error
	}
	var targets []target
	for fsName, base := range bases {
		var st unix.Statfs_t
		must(t, unix.Statfs(base, &st))
		if !stampedLocally(int64(st.Type)) {
			t.Logf("%s (%s): file system %#x keeps no listings", fsName, base, st.Type)
			continue
		}
		for _, o := range listingOps {
			d, e := filepath.Join(base, o.name, "d"), filepath.Join(base, o.name, "e")
			write(t, filepath.Join(d, "f"), "x", 0o644)
			must(t, os.MkdirAll(filepath.Join(d, "sub"), 0o755))
			must(t, os.MkdirAll(filepath.Join(e, "g/hooks"), 0o755))
			write(t, filepath.Join(e, "file"), "gitdir: /x\n", 0o644)
			must(t, os.Symlink("/tmp", filepath.Join(e, "link")))
			targets = append(targets, target{fsName, o.name, d, o.op})
		}
	}
	aged(t)
	for _, tg := range targets {
		listed(t, tg.d) // keeps it
	}
	kept := keptSince()
	for _, tg := range targets {
		listed(t, tg.d)
	}
	if kept() != int64(len(targets)) {
		t.Fatalf("%d of %d listings were kept: the attack below would test nothing", kept(), len(targets))
	}
	old := time.Unix(1_000_000_000, 0)
	for _, tg := range targets {
		if err := tg.do(tg.d, filepath.Join(filepath.Dir(tg.d), "e")); err != nil {
			t.Errorf("%s %s: %v", tg.fs, tg.op, err)
			continue
		}
		must(t, os.Chtimes(tg.d, old, old))
	}
	for _, tg := range targets {
		if got, want := listed(t, tg.d), actual(t, tg.d); !slices.Equal(got, want) {
			t.Errorf("%s %s: a walk saw %v, the folder holds %v", tg.fs, tg.op, got, want)
		}
	}
}

// heldBytes estimates the memory the kept listings hold: a map slot per folder, and an entry and
// its name per entry.
func heldBytes(c *listingCache) int {
	n := 0
	for _, l := range c.byDir {
		n += int(unsafe.Sizeof(listingKey{})+unsafe.Sizeof(listing{})) + 16
		for _, e := range l.entries {
			n += int(unsafe.Sizeof(e)) + len(e.name)
		}
	}
	return n
}

// TestKeptListingsBounded attacks the bound on what the kept listings hold with what a hostile
// workspace (or many calls' workspaces over a daemon's life) offers: a million empty folders,
// which hold no entries but a listing each, and folders of the longest names a file system allows.
func TestKeptListingsBounded(t *testing.T) {
	const limit = 20 << 20 // what the daemon may hold, with room for the map's own overhead
	c := &listingCache{byDir: map[listingKey]listing{}}
	for i := range 1 << 20 {
		c.keep(listingKey{1, 1, uint64(i)}, unix.Timespec{Sec: 1}, nil)
	}
	if n := heldBytes(c); n > limit {
		t.Errorf("a million empty folders: the kept listings hold %d MiB, over %d MiB", n>>20, limit>>20)
	}
	c = &listingCache{byDir: map[listingKey]listing{}}
	long := make([]dirEntry, 1000)
	for i := range long {
		long[i] = dirEntry{name: strings.Repeat("x", 251) + strconv.Itoa(1000+i)}
	}
	for i := range 2000 {
		c.keep(listingKey{1, 1, uint64(i)}, unix.Timespec{Sec: 1}, long)
	}
	if n := heldBytes(c); n > limit {
		t.Errorf("folders of long names: the kept listings hold %d MiB, over %d MiB", n>>20, limit>>20)
	}
}

// TestCompileFindsGitDirsDeepUnderFewFiles attacks the compile's search for nested git
// directories with a deep tree while the daemon has few file descriptors left (a limit, or other
// calls holding them): a walk that kept a folder open per level ran out of them and stopped, and
// the git directory at the bottom went unmasked. It must hold at most a few at a time.
func TestCompileFindsGitDirsDeepUnderFewFiles(t *testing.T) {
	f := newFixture(t)
	deep := f.ws
	for range 400 {
		deep = filepath.Join(deep, "d")
	}
	write(t, filepath.Join(deep, ".git/HEAD"), "ref: refs/heads/main\n", 0o644)
	in := f.input(fsSandbox(nil, []string{"./**"}, nil))
	var lim unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &lim))
	low := lim
	low.Cur = 200
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
	p, err := Compile(in)
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	if err != nil {
		t.Fatal(err)
	}
	wantIn(t, "Deny", p.Deny, filepath.Join(deep, ".git/hooks"), filepath.Join(deep, ".git/config"))
}

// TestKeptListingsDroppedWhenClockSetBack: ctimes come from the wall clock, which the host (an
// administrator, NTP stepping it, a restored virtual machine) may set back; the clock then passes
// again through the ctimes of folders whose listings were kept, and a change can get a kept ctime.
// A listing kept before the clock went back by listingMargin must not be used after. The test
// cannot set the machine's clock; it sets what the cache sees of it (clockSkew).
func TestKeptListingsDroppedWhenClockSetBack(t *testing.T) {
	skew := time.Duration(0)
	real := clockSkew
	clockSkew = func() time.Duration { return skew }
	t.Cleanup(func() { clockSkew = real })
	d := filepath.Join(realTemp(t), "d")
	write(t, filepath.Join(d, "f"), "", 0o644)
	aged(t)
	listed(t, d) // keeps it
	kept := keptSince()
	if listed(t, d); kept() != 1 {
		t.Fatal("the listing was not kept: the test tests nothing")
	}
	skew -= listingMargin / 4 // less than the margin: ctimes cannot repeat
	if listed(t, d); kept() != 2 {
		t.Error("a listing was dropped when the wall clock went back less than the margin")
	}
	skew -= listingMargin
	if listed(t, d); kept() != 2 {
		t.Error("a listing kept before the wall clock was set back was used after")
	}
}

// TestKeptListingsNotAtClampedCtime: a file system that stores 32-bit seconds (ext4 with 128-byte
// inodes, XFS without bigtime) stamps every change after 2038-01-19 with the same, largest ctime,
// so a listing kept at that ctime would never be read again. None is kept at it; the clock of
// the machine cannot be moved there for the test, so it checks the rule that decides.
func TestKeptListingsNotAtClampedCtime(t *testing.T) {
	clamped := unix.Timespec{Sec: math.MaxInt32}
	if oldEnough(clamped, time.Unix(math.MaxInt32, 0).Add(time.Hour)) {
		t.Error("a listing at the largest 32-bit ctime is kept: every later change leaves that ctime")
	}
	if !oldEnough(unix.Timespec{Sec: math.MaxInt32 - 10}, time.Unix(math.MaxInt32, 0)) {
		t.Error("a listing 10 s older than the read is not kept")
	}
}
