package sandbox

import (
	"errors"
	"io/fs"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// journal records, in order, every question one compilation asked outside its Input (each lstat
// and readlink the view made of the kernel, each read of a file whose content it parsed, each
// variable read from the caller's environment) and the answer it got. Compile is a function of
// its Input and of those answers: when every question asked again gets the same answer, a
// compilation would take the same steps and return the same policy (see Cache). The search of a
// writable folder for git directories is recorded too: each folder's listing, and each folder it
// took for an unchanged leaf (see findGitDirs). A compilation that learnt something in a way the
// journal does not record (a listing for a glob or a wildcard, what a .git found points to) is
// opaque and is never replayed.
type journal struct {
	questions []question
	// opaque says why the compilation cannot be replayed; "" when it can.
	opaque string
	// listed is what the recorded listings hold (see maxListedBytes).
	listed int
}

// maxListedBytes bounds the folder entries one journal keeps (their names and a share for each):
// a policy kept for a large writable tree would hold a copy of its every listing (a Cache keeps
// up to maxCachedPolicies), and asking them all again costs as much as the walk. A compilation
// whose walk listed more is opaque.
const maxListedBytes = 64 << 10

// questionKind is what a question asked.
type questionKind uint8

const (
	askLstat questionKind = iota
	askReadlink
	askEnv
	askContent // what the compilation read of a file (see recordingReader)
	askListing // a writable folder's entries, as findGitDirs read them
	askLeaf    // whether findGitDirs took a folder for an unchanged leaf, and its count
)

// question is one question and its answer.
type question struct {
	kind questionKind
	name string // the path asked about, or the variable's name
	// lstat: what sameFile compares, and errno when it failed.
	st    syscall.Stat_t
	errno syscall.Errno
	// readlink: the target; env: the value, and set whether the variable is set.
	text string
	set  bool
	// content: the reads and what they got.
	reads []fileRead
	// listing: the entries (errno when the folder could not be read); leaf: set and count.
	entries []dirEntry
	count   int
}

// markOpaque records that the compilation learnt something the journal cannot ask again. The
// first reason is kept. A nil journal (a compilation not recorded) ignores it.
func (j *journal) markOpaque(why string) {
	if j != nil && j.opaque == "" {
		j.opaque = why
	}
}

// lstat records the answer of os.Lstat(p).
func (j *journal) lstat(p string, fi fs.FileInfo, err error) {
	if j == nil {
		return
	}
	q := question{kind: askLstat, name: p}
	if err != nil {
		if q.errno = errnoOf(err); q.errno == 0 {
			j.markOpaque("lstat " + p + ": an error without an errno")
			return
		}
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		q.st = *st
	} else {
		j.markOpaque("lstat " + p + ": no stat data")
		return
	}
	j.questions = append(j.questions, q)
}

// content records that the compilation read the file p with reads (see recordingReader): used
// again only while the same reads get the same bytes.
func (j *journal) content(p string, reads []fileRead) {
	if j != nil {
		j.questions = append(j.questions, question{kind: askContent, name: p, reads: reads})
	}
}

// listing records findGitDirs's listing of the folder dir (folderListing).
func (j *journal) listing(dir string, entries []dirEntry, err error) {
	if j == nil || j.opaque != "" {
		return
	}
	for _, e := range entries {
		j.listed += len(e.name) + keptEntryBytes
	}
	if j.listed > maxListedBytes {
		j.markOpaque("a writable folder with too many entries to keep its listings")
		return
	}
	q := question{kind: askListing, name: dir, entries: entries}
	if err != nil {
		if q.errno = errnoOf(err); q.errno == 0 {
			j.markOpaque("list " + dir + ": an error without an errno")
			return
		}
		q.entries = nil // the walk stops at the error: what was read before it does not count
	}
	j.questions = append(j.questions, q)
}

// leaf records findGitDirs's answer for the folder p (gitWalkLeaf).
func (j *journal) leaf(p string, n int, ok bool) {
	if j != nil {
		j.questions = append(j.questions, question{kind: askLeaf, name: p, count: n, set: ok})
	}
}

// readlink records the answer of os.Readlink(p).
func (j *journal) readlink(p, target string, err error) {
	if j == nil {
		return
	}
	q := question{kind: askReadlink, name: p, text: target}
	if err != nil {
		if q.errno = errnoOf(err); q.errno == 0 {
			j.markOpaque("readlink " + p + ": an error without an errno")
			return
		}
	}
	j.questions = append(j.questions, q)
}

// lookupEnv returns lookup, recording each answer it gives; nil stays nil.
func (j *journal) lookupEnv(lookup func(string) (string, bool)) func(string) (string, bool) {
	if j == nil || lookup == nil {
		return lookup
	}
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		j.questions = append(j.questions, question{kind: askEnv, name: name, text: v, set: ok})
		return v, ok
	}
}

// errnoOf returns the errno err carries, or 0.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// sameAnswers asks every question of j again, in order, and reports whether each gets the answer
// it got then; lookup is the caller's environment now. It stops at the first difference. With
// watched, it asks no lstat nor readlink question: a watcher found none can have a new answer.
func (j *journal) sameAnswers(lookup func(string) (string, bool), watched bool) bool {
	var st unix.Stat_t
	var buf []byte // readlink's, made at the first link
	for i := range j.questions {
		q := &j.questions[i]
		if watched && (q.kind == askLstat || q.kind == askReadlink) {
			continue
		}
		switch q.kind {
		case askLstat:
			err := unix.Lstat(q.name, &st)
			if errnoOf(err) != q.errno || err == nil && !sameFile(&q.st, &st) {
				return false
			}
		case askContent:
			if !sameReads(q.name, q.reads) {
				return false
			}
		case askReadlink:
			if buf == nil {
				buf = make([]byte, unix.PathMax)
			}
			n, err := unix.Readlink(q.name, buf)
			if errnoOf(err) != q.errno || err == nil && (n >= len(buf) || string(buf[:n]) != q.text) {
				return false
			}
		case askListing:
			entries, err := folderListing(q.name)
			if errnoOf(err) != q.errno || err != nil && q.errno == 0 || err == nil && !slices.Equal(entries, q.entries) {
				return false
			}
		case askLeaf:
			if n, ok := gitWalkLeaf(q.name); n != q.count || ok != q.set {
				return false
			}
		case askEnv:
			if lookup == nil {
				return false
			}
			if v, ok := lookup(q.name); v != q.text || ok != q.set {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// sameFile reports whether now answers an lstat as then did, for what a compilation reads from
// an lstat: the file's device and inode, its type and permission bits (set-id and sticky
// included), owner, group and device number, and, for what is not a directory, its link count
// (Policy.Notes name a denied file's hard links). Not its size and times: the content of a file
// the compilation read is compared itself (askContent), and a file it only named (a denied log
// the daemon appends to) changes them at every call. A directory's link count changes with
// its entries, which a compilation learns by asking about each entry (or not at all: a listing
// makes it opaque).
func sameFile(then *syscall.Stat_t, now *unix.Stat_t) bool {
	if then.Dev != now.Dev || then.Ino != now.Ino || then.Mode != now.Mode || then.Uid != now.Uid ||
		then.Gid != now.Gid || then.Rdev != now.Rdev {
		return false
	}
	return then.Mode&syscall.S_IFMT == syscall.S_IFDIR || then.Nlink == now.Nlink
}
