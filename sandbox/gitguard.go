package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The git rule. After a call, no git command the workspace owner runs in a writable root, or in
// any repository nested in one, may run a program the call chose. Everything git reads to decide
// what to run lies in a git directory (config, config.worktree, hooks, info/attributes, the
// commondir it points to, rebase and sequencer todo lists) or points to one (a .git gitfile, a
// commondir file); git finds git directories only as a `.git` entry or as a directory holding
// HEAD with objects/ and refs/ (a bare repository) or HEAD with commondir (a worktree's). So the
// guard walks every writable root whole, before the call (the snapshot) and after it, treats
// every `.git` entry and every directory holding HEAD next to commondir, objects or refs as a git
// directory, fingerprints the control files in each, and judges those the call created or changed:
//
//   - a config or config.worktree keeps what it held before the call and, of the rest, only
//     gitConfigAllowed variables (rewritten without the others; the original is kept under a
//     quarantine name git never reads);
//   - a gitfile or commondir must point, through no symbolic link, at a git directory found by
//     the same walk (whose own files are judged the same way); otherwise it is quarantined;
//   - a hook (anything in hooks/ but *.sample), info/attributes, a symbolic link in place of any
//     control file, and a todo list holding an exec line are quarantined.
//
// What existed before the call is left alone: only changes are judged, and a file the call changed
// is put back as it was once its new content is moved aside. The same walk records the files
// other tools read in a directory for programs to run (runConfigs) and quarantines those the call
// created or changed whose content names one. The per-user git files (~/.gitconfig and the XDG
// ones, and every link on the way to one) are judged as configs when a writable root holds them,
// and so are the files the configs include (include.path, includeIf.*.path) when a writable root
// holds them: those found before the call, at the paths found then, reached through no symbolic
// link. A directory clihost cannot list (a call of the owner's uid may chmod it, and git needs only
// search permission to use it) is made readable to its owner and checked, or else moved aside (see
// scanner.openDir).

// DefaultGitGuardBudget is the most directory entries the snapshot reads in the writable roots of
// one call: over it, the call is refused (ErrGitGuardBudget). The check after the call has no
// budget: it reads whatever the call wrote.
const DefaultGitGuardBudget = 1_000_000

// quarantineSuffix is appended to the name of what the guard moves aside. Git reads no file of
// that name.
const quarantineSuffix = ".clihost-quarantined"

// ErrGitGuardBudget is returned when a writable root holds more entries than the guard may read.
var ErrGitGuardBudget = errors.New("the writable root holds more entries than clihost checks for git metadata")

// errRootUnreadable marks a writable root the guard could not open: its git metadata cannot be
// checked, so a snapshot refuses the call.
var errRootUnreadable = errors.New("cannot be read")

// errDirUnreadable marks a directory in a writable root that the guard can neither list nor make
// listable, although the CLI (the same uid) can enter it: a snapshot refuses the call.
var errDirUnreadable = errors.New("cannot be listed by clihost nor made listable, although the CLI can enter it")

// maxIncludeDepth is how deep git follows include.path and includeIf.*.path (its
// MAX_INCLUDE_DEPTH): a deeper include makes git stop with an error.
const maxIncludeDepth = 10

// controlKind says how a control file is judged.
type controlKind uint8

const (
	ctlConfig    controlKind = iota // config, config.worktree
	ctlPointer                      // .git gitfile, commondir
	ctlHook                         // hooks/*, info/attributes: quarantined when new or changed
	ctlTodo                         // rebase-merge/git-rebase-todo, sequencer/todo
	ctlRunConfig                    // another tool's configuration naming programs (runConfigs)
)

// control is one file git reads for configuration or programs.
type control struct {
	path string // absolute
	kind controlKind
	fp   string // fingerprint: type, mode and content
	root string // the writable root it lies in
	run  *runConfig
	data []byte // a regular file's content, up to maxControlRead bytes (for the snapshot)
}

// gitSnapshot is the state of the control files of every git directory in the writable roots.
type gitSnapshot struct {
	fps map[string]string
	// includes are the files the configs found include (see includeTargets), judged as configs
	// after the call whatever the configs then say: an include the call adds is dropped with it.
	includes []string
	// linkedHooks are the hook directories found before the call outside the walk's view (where
	// the owner's link led, or named by an included file), judged after it at their own paths.
	linkedHooks []string
	// found are the directories the snapshot had to make readable, reported with the check's.
	found []GitFinding
	// prior are the control files as they were, so that a changed one is put back (a config
	// keeps what it held before).
	prior map[string]priorFile
}

// priorFile is a control file as the snapshot found it: a link's target, or a regular file's
// content and permission bits.
type priorFile struct {
	link string
	data []byte
	perm uint32
}

// GitFinding is one thing the guard neutralised after a call.
type GitFinding struct {
	// Path is the file or link the call created or changed.
	Path string
	// Action is "rewritten" (a config without the variables Dropped names), "quarantined" (moved
	// aside), "restored" (moved aside, and what was there before the call put back) or "made
	// readable" (a directory clihost could not list, given u+rwx to be checked).
	Action string
	// Moved is where the original went (Path + ".clihost-quarantined", or with a number).
	Moved string
	// Dropped are the config variables removed (section.name, "*" for a subsection).
	Dropped []string
	// Why says what made it unsafe.
	Why string
}

// SnapshotGit records the git control files of every writable root before the call runs, for
// Sweep to judge what the call changed. budget is the most directory entries it reads (0:
// DefaultGitGuardBudget); a root holding more is an error wrapping ErrGitGuardBudget, and the
// call must be refused, since its git metadata could not be checked afterwards.
func (p *Policy) SnapshotGit(budget int) error {
	if budget <= 0 {
		budget = DefaultGitGuardBudget
	}
	sc := scanRoots(p.Writable, p.gitGlobal, budget, nil)
	if errors.Is(sc.err, errRootUnreadable) || errors.Is(sc.err, errDirUnreadable) {
		return sc.err
	}
	// A directory this uid can enter but not list refused the call (errDirUnreadable); one it
	// cannot enter is skipped: nothing the CLI (the same uid, or a root host's agent, who is never
	// refused what root is) runs can reach inside either.
	if len(sc.incomplete) > 0 {
		return fmt.Errorf("%s: %w (%d entries); narrow fs.write", strings.Join(sc.incomplete, ", "), ErrGitGuardBudget, budget)
	}
	s := &gitSnapshot{fps: map[string]string{}, prior: map[string]priorFile{}, includes: sc.includes, linkedHooks: sc.linkedHooks, found: sc.found}
	for _, c := range sc.ctls {
		s.fps[c.path] = c.fp
		if pf, ok := priorOf(c); ok {
			s.prior[c.path] = pf
		}
	}
	p.git = s
	return nil
}

// GitPolicy returns a policy that holds only what the git rule needs: the writable roots, and the
// per-user git files of home. It is for a process whose sandbox was compiled elsewhere (clihostctl
// login runs, in the terminal, the plan clihostd compiled): SnapshotGit before it, Sweep after.
func GitPolicy(writable []string, home string) *Policy {
	c := &compiler{home: home, fs: newView()}
	return &Policy{Writable: slices.Clone(writable), gitGlobal: c.gitGlobalFiles()}
}

// checkGit judges every control file the call created or changed since SnapshotGit.
func (p *Policy) checkGit() ([]GitFinding, error) {
	// No budget here: whatever the call wrote is read, at a cost linear in what it wrote.
	sc := scanRoots(p.Writable, p.gitGlobal, 0, p.git)
	errs := []error{sc.err}
	found := slices.Concat(p.git.found, sc.found)
	for _, c := range sc.ctls {
		if p.git.fps[c.path] == c.fp {
			continue
		}
		var prior *priorFile
		if pf, ok := p.git.prior[c.path]; ok {
			prior = &pf
		}
		f, err := judge(c, sc.dirs, p.Writable, prior)
		if err != nil {
			errs = append(errs, err)
		}
		if f != nil {
			found = append(found, *f)
		}
	}
	return found, errors.Join(errs...)
}

// scan is what scanRoots found.
type scan struct {
	ctls []control
	// dirs are the git directories found (absolute).
	dirs map[string]bool
	// incomplete are the roots the walk could not finish within its budget.
	incomplete []string
	// includes are the files the configs include (see includeTargets).
	includes []string
	// linkedHooks are the hook directories judged after the call at the paths found before it (see
	// gitSnapshot.linkedHooks).
	linkedHooks []string
	// found are the directories made readable or moved aside (see scanner.openDir).
	found []GitFinding
	err   error
}

// scanRoots walks each writable directory root and returns its control files, within budget
// entries (0: no limit). global are git's per-user files, recorded as configs wherever the walk
// meets them. after is nil for the snapshot; for the check after the call it is the snapshot,
// whose includes are judged again.
func scanRoots(roots, global []string, budget int, after *gitSnapshot) scan {
	out := scan{dirs: map[string]bool{}}
	hookDirs := map[string]bool{}
	linked := &out.linkedHooks
	names := make([]string, len(global))
	for i, g := range global {
		names[i] = filepath.Base(g)
	}
	var errs []error
	for _, r := range roots {
		fd, err := unix.Open(r, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			out.ctls = append(out.ctls, fileRoot(r, global)...)
			continue
		}
		if errors.Is(err, unix.ENOENT) {
			continue // not writable in this call (see Plan)
		}
		s := &scanner{root: r, left: budget, limited: budget > 0, dirs: out.dirs, global: global, globalNames: names, roots: roots,
			hookDirs: hookDirs, linkedHooks: linked, check: after != nil}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			fd, err = s.openRoot(r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("git check of %s: %w: %w", r, errRootUnreadable, err))
			continue
		}
		if fd >= 0 {
			if err := s.dir(fd, r); err != nil {
				out.incomplete = append(out.incomplete, r)
			}
		}
		out.ctls = append(out.ctls, s.ctls...)
		out.found = append(out.found, s.found...)
		errs = append(errs, s.errs...)
	}
	s := &scanner{global: global, globalNames: names, roots: roots, hookDirs: hookDirs, linkedHooks: linked, check: after != nil}
	s.outsideTheWalk(&out, after)
	out.ctls = uniqueControls(append(out.ctls, s.ctls...))
	out.found = append(out.found, s.found...)
	out.err = errors.Join(append(errs, s.errs...)...)
	return out
}

// outsideTheWalk records the control files the walk does not meet as such: the hooks of a per-user
// core.hooksPath that is absolute (or under ~), which serves every repository of the owner,
// inside the writable roots or not; the files the configs include; and the hook directories the
// owner's links lead to. The last two are found in the tree as it is before the call (after nil)
// and judged after it at the same paths.
func (s *scanner) outsideTheWalk(out *scan, after *gitSnapshot) {
	for _, h := range s.hooksElsewhere(-1, "/", nil) {
		_ = s.hookDir(h) // unlimited: a few hooks
	}
	if after == nil {
		out.includes = s.includeTargets(out.ctls)
		return
	}
	out.includes = after.includes
	for _, p := range out.includes {
		s.record(p, ctlConfig)
	}
	for _, d := range after.linkedHooks {
		at, isLink, ok := firstLink(d)
		switch {
		case !ok || s.hookDirs[d]:
		case isLink:
			s.record(at, ctlHook)
		default:
			s.hookDirs[d] = true
			_ = s.hookDir(d)
		}
	}
}

// uniqueControls keeps the first control of each path: a file can be both a repository's config
// and a file another config includes.
func uniqueControls(ctls []control) []control {
	seen := map[string]bool{}
	return slices.DeleteFunc(ctls, func(c control) bool {
		dup := seen[c.path]
		seen[c.path] = true
		return dup
	})
}

// fileRoot records a writable root that is a file when it is one git or another tool reads for
// programs: a per-user git config, or a runConfig. Its directory stands for the root.
func fileRoot(r string, global []string) []control {
	dir, name := filepath.Split(r)
	dir = filepath.Clean(dir)
	kind, rc := ctlConfig, runConfigFor(filepath.Base(dir), name)
	switch {
	case rc != nil:
		kind = ctlRunConfig
	case !slices.Contains(global, r):
		return nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // the root's directory is gone: so is the root
	}
	defer unix.Close(fd)
	s := &scanner{root: dir}
	s.add(fd, dir, name, kind)
	s.ctls[0].run = rc
	return s.ctls
}

// scanner walks one writable root through directory descriptors, never following a symbolic link.
type scanner struct {
	root string
	// left is what remains of the budget of directory entries, which binds only when limited.
	left    int
	limited bool
	dirs    map[string]bool
	ctls    []control
	// global are git's per-user config files (see Policy.gitGlobal), globalNames their base
	// names, for isGlobal's quick test of every entry a walk meets.
	global, globalNames []string
	// roots are all the writable roots; hookDirs the hook directories outside git directories
	// already recorded (see hooksElsewhere).
	roots    []string
	hookDirs map[string]bool
	// linkedHooks collects, in the snapshot, the hook directories reached through a symbolic
	// link or named by an included file (see gitSnapshot.linkedHooks).
	linkedHooks *[]string
	// errs are the directories that could not be read; the walk goes on past them.
	errs []error
	// check is set in the check after the call (a directory that cannot be read is moved
	// aside), not in the snapshot (it refuses the call); found are what openDir did.
	check bool
	found []GitFinding
}

// gitNames are the entries isGitDir and gitDir look at.
var gitNames = map[string]bool{"HEAD": true, "commondir": true, "objects": true, "refs": true, "config": true,
	"config.worktree": true, "hooks": true, "info": true, "rebase-merge": true, "sequencer": true}

// dir lists the directory open at fd (which it closes; see list), records the control files among
// its entries and descends into its subdirectories as it meets them, then records its
// git control files when it is a git directory. It returns ErrGitGuardBudget when the walk went
// over a limited budget; a directory that cannot be read is recorded in s.errs and skipped.
//
// A directory whose path is 2×PATH_MAX bytes or longer is not read: git cannot reach it. Git runs
// only in a directory whose path getcwd can return (shorter than PATH_MAX), and reaches others by
// path strings shorter than PATH_MAX relative to that one. The bound also keeps the descriptors
// the walk holds open under PATH_MAX.
func (s *scanner) dir(fd int, path string) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if len(path) >= 2*unix.PathMax {
		return nil
	}
	entries, err := s.list(f, fd)
	if errors.Is(err, ErrGitGuardBudget) {
		return err
	}
	var names map[string]os.FileMode // made for the first of gitNames: most folders hold none
	for _, e := range entries {
		if gitNames[e.name] {
			if names == nil {
				names = map[string]os.FileMode{}
			}
			names[e.name] = e.typ
		}
		if err := s.entry(fd, path, e.name, e.typ); err != nil {
			return err
		}
	}
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("git check: read %s: %w", path, err))
	}
	if isGitDir(path, names) {
		s.dirs[path] = true
		return s.gitDir(fd, path, names)
	}
	return nil
}

// list returns the entries of the directory open as f (fd; see readEntries), counting them
// against the walk's budget: ErrGitGuardBudget when the walk goes over a limited one.
func (s *scanner) list(f *os.File, fd int) ([]dirEntry, error) {
	return readEntries(f, fd, func(n int) error {
		if s.left -= n; s.limited && s.left < 0 {
			return ErrGitGuardBudget
		}
		return nil
	})
}

// entry records name, an entry of type typ of the directory path open at fd, when it is a control
// file outside a git directory's own (a .git gitfile or link, a per-user git file, a runConfig),
// and walks it when it is a directory.
func (s *scanner) entry(fd int, path, name string, typ os.FileMode) error {
	if name == ".git" && typ&os.ModeDir == 0 {
		s.add(fd, path, name, ctlPointer)
	}
	if s.isGlobal(path, name) {
		s.add(fd, path, name, ctlConfig)
	}
	if rc := runConfigFor(filepath.Base(path), name); rc != nil {
		s.add(fd, path, name, ctlRunConfig)
		s.ctls[len(s.ctls)-1].run = rc
	}
	if typ&os.ModeDir == 0 {
		return nil
	}
	sub := filepath.Join(path, name)
	if skip, err := s.unchangedLeaf(fd, name, sub); skip || err != nil {
		return err
	}
	child, err := s.openDir(fd, path, name)
	if err != nil || child < 0 {
		return nil
	}
	return s.dir(child, sub)
}

// unchangedLeaf reports whether the folder name (at path) of the folder open at fd is one whose
// kept listing is still good (see listings) and holds no folder and nothing entry or dir would
// record: then a walk has nothing to do in it but count its entries against the budget, which it
// does without opening it. It returns ErrGitGuardBudget when they take the walk over a limited
// budget.
func (s *scanner) unchangedLeaf(fd int, name, path string) (bool, error) {
	if name == ".git" || len(path) >= 2*unix.PathMax {
		return false, nil
	}
	st, stated := statFolder(fd, name, unix.AT_SYMLINK_NOFOLLOW)
	if !stated {
		return false, nil
	}
	n, ok := keptLeaf(st, func(e string) bool {
		return e == ".git" || gitNames[e] || runConfigFor(name, e) != nil || s.isGlobal(path, e)
	})
	if !ok {
		return false, nil
	}
	if s.left -= n; s.limited && s.left < 0 {
		return true, ErrGitGuardBudget
	}
	return true, nil
}

// isGlobal reports whether name, in the directory path, is one of git's per-user files: by path,
// whatever its name (gitGlobalFiles resolves links, and ~/.gitconfig often links to a dotfiles
// repository's gitconfig).
func (s *scanner) isGlobal(path, name string) bool {
	for i, g := range s.global {
		if s.globalNames[i] == name && filepath.Dir(g) == filepath.Clean(path) {
			return true
		}
	}
	return false
}

// isGitDir reports whether a directory with these entries is one git could use: a .git
// directory, or HEAD next to commondir, objects or refs.
func isGitDir(path string, names map[string]os.FileMode) bool {
	if filepath.Base(path) == ".git" {
		return true
	}
	if _, ok := names["HEAD"]; !ok {
		return false
	}
	for _, n := range []string{"commondir", "objects", "refs"} {
		if _, ok := names[n]; ok {
			return true
		}
	}
	return false
}

// gitDir records the control files of the git directory open at fd.
func (s *scanner) gitDir(fd int, path string, names map[string]os.FileMode) error {
	for _, n := range []string{"config", "config.worktree"} {
		if _, ok := names[n]; ok {
			s.add(fd, path, n, ctlConfig)
		}
	}
	if _, ok := names["commondir"]; ok {
		s.add(fd, path, "commondir", ctlPointer)
	}
	sub := []struct {
		dir   string
		kind  controlKind
		match func(string) bool
	}{
		{"hooks", ctlHook, isHook},
		{"info", ctlHook, func(n string) bool { return n == "attributes" }},
		{"rebase-merge", ctlTodo, func(n string) bool { return n == "git-rebase-todo" }},
		{"sequencer", ctlTodo, func(n string) bool { return n == "todo" }},
	}
	for _, d := range sub {
		mode, ok := names[d.dir]
		switch {
		case !ok:
			continue
		case mode&os.ModeDir == 0:
			// A symbolic link (or anything but a directory) in place of hooks/ or info/.
			s.add(fd, path, d.dir, ctlHook)
			continue
		}
		if err := s.listDir(s.root, fd, filepath.Join(path, d.dir), d.kind, d.match); err != nil {
			return err
		}
	}
	for _, h := range s.hooksElsewhere(fd, path, names) {
		if err := s.hookDir(h); err != nil {
			return err
		}
	}
	return nil
}

// isHook reports whether git could run the file name in a hooks directory.
func isHook(name string) bool {
	return !strings.HasSuffix(name, ".sample") && !strings.Contains(name, quarantineSuffix)
}

// hooksElsewhere returns the directories, inside a writable root, from which git runs the hooks
// of the git directory path besides its own hooks/ directory: the target of hooks/ when it is a
// symbolic link, and core.hooksPath set by its config or the per-user ones (which existed before
// the call, or the config's own judgement drops them). Each is resolved through no symbolic link
// (see resolveHookDirs); one already recorded is left out. With names nil it looks at the per-user
// configs alone, for their absolute values.
func (s *scanner) hooksElsewhere(fd int, path string, names map[string]os.FileMode) []string {
	var cands []string
	if mode, ok := names["hooks"]; ok && mode&os.ModeSymlink != 0 {
		buf := make([]byte, unix.PathMax)
		if n, err := unix.Readlinkat(fd, "hooks", buf); err == nil {
			cands = append(cands, absFrom(path, string(buf[:n])))
		}
	}
	worktree := path // where git resolves a relative core.hooksPath: the work tree, or a bare repository
	if filepath.Base(path) == ".git" {
		worktree = filepath.Dir(path)
	}
	configs := slices.Clone(s.global)
	if _, ok := names["config"]; ok {
		configs = append(configs, filepath.Join(path, "config"))
	}
	if names == nil {
		worktree = "" // the per-user configs alone (fd and path unused): absolute values only
	}
	for _, c := range configs {
		cands = append(cands, s.hooksPathDirs(readFollowing(c), worktree)...)
	}
	return s.resolveHookDirs(cands, filepath.Join(path, "hooks"))
}

// hooksPathDirs returns the directories the core.hooksPath values of a config (its content) name:
// relative to worktree, under ~ from the home; only absolute ones when worktree is empty.
func (s *scanner) hooksPathDirs(config []byte, worktree string) []string {
	home := s.home()
	var out []string
	entries, _ := parseGitConfig(config)
	for _, e := range entries {
		if e.section != "core" || e.sub != "" || e.name != "hookspath" || e.value == "" {
			continue
		}
		v := e.value
		if rest, ok := strings.CutPrefix(v, "~/"); ok && home != "" {
			v = filepath.Join(home, rest)
		}
		if filepath.IsAbs(v) || worktree != "" {
			out = append(out, absFrom(worktree, v))
		}
	}
	return out
}

// resolveHookDirs returns the hook directories cands name that lie in a writable root and are not
// recorded yet (nor own, the git directory's hooks/), reached through no symbolic link.
func (s *scanner) resolveHookDirs(cands []string, own string) []string {
	var out []string
	for _, c := range cands {
		// Never through a link: one met on the way is judged itself, as a hook. In the snapshot,
		// the directory behind it (the owner's link) is recorded too, and judged after the call
		// at its own path, through no link.
		r, isLink, ok := firstLink(c)
		if !ok || r == own || s.hookDirs[r] || !s.inRoots(r) {
			continue
		}
		s.hookDirs[r] = true
		if !isLink {
			out = append(out, r)
			continue
		}
		s.record(r, ctlHook)
		if real, err := filepath.EvalSymlinks(c); err == nil && !s.check && !s.hookDirs[real] && s.inRoots(real) {
			s.hookDirs[real] = true
			*s.linkedHooks = append(*s.linkedHooks, real)
			out = append(out, real)
		}
	}
	return out
}

// inRoots reports whether p lies in one of the writable roots.
func (s *scanner) inRoots(p string) bool { return s.rootOf(p) != "" }

// rootOf returns the writable root p lies in, or "".
func (s *scanner) rootOf(p string) string {
	if i := slices.IndexFunc(s.roots, func(w string) bool { return within(p, w) }); i >= 0 {
		return s.roots[i]
	}
	return ""
}

// firstLink resolves p (absolute) as resolveNoLinks does, but stops at a symbolic link: it returns
// the path of the first link met (isLink), or p resolved; ok is false when a component is missing.
func firstLink(p string) (at string, isLink, ok bool) {
	cur := "/"
	for _, comp := range strings.Split(p, "/") {
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		cur = filepath.Join(cur, comp)
		st, err := os.Lstat(cur)
		if err != nil {
			return "", false, false
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return cur, true, true
		}
	}
	return cur, false, true
}

// record records the file at p as a control of kind when it lies in a writable root, reached
// through no symbolic link: the first link on the way is recorded in its place (a link in place
// of a control file is neutralised when new or changed). It returns the control recorded, if any.
func (s *scanner) record(p string, kind controlKind) *control {
	at, _, ok := firstLink(p)
	root := s.rootOf(at)
	if !ok || root == "" || at == "/" {
		return nil
	}
	dfd, err := openBeneath(root, filepath.Dir(at))
	if err != nil {
		return nil // changed since: the check walks it again
	}
	defer unix.Close(dfd)
	fp, data := fingerprint(dfd, filepath.Base(at))
	s.ctls = append(s.ctls, control{path: at, kind: kind, fp: fp, root: root, data: data})
	return &s.ctls[len(s.ctls)-1]
}

// includeTargets returns the files the configs among ctls and the per-user configs include
// (include.path, includeIf.*.path whatever the condition: a relative path from the including
// file's directory, ~/ from the home), and what those include in turn, as deep as git reads. Each
// is recorded (see record): the walk finds no included file as a control file of its own.
func (s *scanner) includeTargets(ctls []control) []string {
	type source struct {
		path string
		data []byte
		// worktree is where a relative core.hooksPath of the repository the source serves
		// points from ("" for the per-user configs: only absolute values).
		worktree string
		depth    int
	}
	var queue []source
	for _, g := range s.global {
		queue = append(queue, source{path: g, data: readFollowing(g)})
	}
	for _, c := range ctls {
		if c.kind == ctlConfig && !slices.Contains(s.global, c.path) {
			wt := filepath.Dir(c.path)
			if filepath.Base(wt) == ".git" {
				wt = filepath.Dir(wt)
			}
			queue = append(queue, source{path: c.path, data: c.data, worktree: wt})
		}
	}
	home := s.home()
	seen := map[string]bool{}
	var out []string
	for len(queue) > 0 {
		src := queue[0]
		queue = queue[1:]
		if src.depth > 0 {
			// A core.hooksPath the included file sets (the including ones are hooksElsewhere's).
			for _, d := range s.resolveHookDirs(s.hooksPathDirs(src.data, src.worktree), "") {
				*s.linkedHooks = append(*s.linkedHooks, d)
				_ = s.hookDir(d)
			}
		}
		entries, _ := parseGitConfig(src.data)
		for _, e := range entries {
			if e.name != "path" || e.value == "" || (e.section != "include" && e.section != "includeif") || (e.section == "include" && e.sub != "") {
				continue
			}
			v := e.value
			if rest, ok := strings.CutPrefix(v, "~/"); ok {
				if home == "" {
					continue
				}
				v = filepath.Join(home, rest)
			}
			targets := []string{absFrom(filepath.Dir(src.path), v)}
			// Through a link (the owner's: this is the tree before the call), the file behind it
			// too, judged after the call at its own path, through no link.
			if _, isLink, _ := firstLink(targets[0]); isLink {
				if real, err := filepath.EvalSymlinks(targets[0]); err == nil {
					targets = append(targets, real)
				}
			}
			for _, t := range targets {
				if seen[t] {
					continue
				}
				seen[t] = true
				out = append(out, t)
				if c := s.record(t, ctlConfig); c != nil && src.depth+1 < maxIncludeDepth {
					queue = append(queue, source{path: t, data: c.data, worktree: src.worktree, depth: src.depth + 1})
				}
			}
		}
	}
	return out
}

// home is the home directory ~/ stands for in the per-user configs: that of ~/.gitconfig.
func (s *scanner) home() string {
	if i := slices.IndexFunc(s.global, func(g string) bool { return filepath.Base(g) == ".gitconfig" }); i >= 0 {
		return filepath.Dir(s.global[i])
	}
	return ""
}

// readFollowing reads up to maxControlRead bytes of the regular file at path, following links (the
// owner's own ~/.gitconfig may be one) and without blocking: only to learn what it points git at.
// The file is looked up with O_PATH first and opened for reading only when that is a regular file:
// a root daemon reads the caller's per-user configs, and a link from there to a device
// (/dev/watchdog) must not get root to open it (opening a device acts).
func readFollowing(path string) []byte {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if unix.Fstat(pfd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	// The very file looked up, whatever path now names.
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, maxControlRead))
	return data
}

// absFrom makes p absolute against base.
func absFrom(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// hookDir records the hooks in dir, a directory inside a writable root that git takes hooks from.
func (s *scanner) hookDir(dir string) error {
	root := s.rootOf(dir)
	pfd, err := openBeneath(root, filepath.Dir(dir))
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("git check: %w", err))
		return nil
	}
	defer unix.Close(pfd)
	return s.listDir(root, pfd, dir, ctlHook, isHook)
}

// listDir records, as controls of kind in the writable root root, the entries of the directory
// path that match; parentFD is path's parent directory, open.
func (s *scanner) listDir(root string, parentFD int, path string, kind controlKind, match func(string) bool) error {
	fd, err := s.openDir(parentFD, filepath.Dir(path), filepath.Base(path))
	if err != nil || fd < 0 {
		return nil
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if s.left -= len(entries); s.limited && s.left < 0 {
		return ErrGitGuardBudget
	}
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("git check: read %s: %w", path, err))
	}
	for _, e := range entries {
		if match(e.Name()) {
			fp, data := fingerprint(fd, e.Name())
			s.ctls = append(s.ctls, control{path: filepath.Join(path, e.Name()), kind: kind, fp: fp, root: root, data: data})
		}
	}
	return nil
}

// openDir opens the directory name of the directory parent, open at pfd, to list it, never
// following a link; fd is -1 when there is nothing to list. A directory clihost may not list (a
// call of the same uid can chmod it: Landlock does not control chmod, and git, run by the owner,
// needs only search permission to use what is in it) is made readable to its owner (u+rwx, through
// a descriptor of that very directory) and listed. One that cannot be made readable is skipped when
// this uid cannot enter it either (nothing the CLI runs can reach inside); otherwise the snapshot
// refuses the call (errDirUnreadable) and the check moves it aside.
func (s *scanner) openDir(pfd int, parent, name string) (int, error) {
	path := filepath.Join(parent, name)
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		return fd, nil
	}
	if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
		err = fmt.Errorf("git check: open %s: %w", path, err)
		s.errs = append(s.errs, err)
		return -1, err
	}
	fd, mode, err := reopenReadable(pfd, name)
	if err == nil {
		s.found = append(s.found, GitFinding{Path: path, Action: "made readable",
			Why: fmt.Sprintf("clihost could not list it (mode %04o) to check the git metadata in it, which git can still use", mode)})
		return fd, nil
	}
	if unix.Faccessat(pfd, name, unix.X_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW) != nil {
		return -1, nil
	}
	if !s.check {
		err = fmt.Errorf("git check: %s %w (%w); make it readable or narrow fs.write", path, errDirUnreadable, err)
		s.errs = append(s.errs, err)
		return -1, err
	}
	moved, err := moveAside(pfd, path)
	if err != nil {
		err = fmt.Errorf("git check: %s %w: %w", path, errDirUnreadable, err)
		s.errs = append(s.errs, err)
		return -1, err
	}
	s.found = append(s.found, GitFinding{Path: path, Action: "quarantined", Moved: moved,
		Why: "clihost can neither list it nor make it listable to check the git metadata in it, and git could use what is in it"})
	return -1, nil
}

// reopenReadable gives the directory name of the directory open at pfd, not a link, u+rwx through a
// descriptor of it, and opens it to list it. mode is its permission bits before.
func reopenReadable(pfd int, name string) (fd int, mode uint32, err error) {
	pathFD, err := unix.Openat(pfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	defer unix.Close(pathFD)
	var st unix.Stat_t
	if err := unix.Fstat(pathFD, &st); err != nil {
		return -1, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, 0, unix.ENOTDIR
	}
	mode = st.Mode & 0o7777
	// The descriptor's /proc link names that very directory, whatever its path holds now.
	self := "/proc/self/fd/" + strconv.Itoa(pathFD)
	if err := unix.Chmod(self, mode|0o700); err != nil {
		return -1, mode, err
	}
	fd, err = unix.Open(self, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return fd, mode, err
}

// openRoot opens the writable root r, which could not be opened directly, through its parent (see
// openDir).
func (s *scanner) openRoot(r string) (int, error) {
	pfd, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(r), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	n := len(s.errs)
	fd, err := s.openDir(pfd, filepath.Dir(r), filepath.Base(r))
	s.errs = s.errs[:n] // reported by the caller
	return fd, err
}

// add records the control file name of the directory open at dirFD.
func (s *scanner) add(dirFD int, dir, name string, kind controlKind) {
	fp, data := fingerprint(dirFD, name)
	s.ctls = append(s.ctls, control{path: filepath.Join(dir, name), kind: kind, fp: fp, root: s.root, data: data})
}

// gitGlobalFiles are git's per-user configuration and attributes files for the calling user: each
// as git reads it, through links, and every symbolic link on the way (a call that points one
// elsewhere changes what git reads), each at its path through no link.
func (c *compiler) gitGlobalFiles() []string {
	xdg := c.lookupAbs("XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = filepath.Join(c.home, ".config")
	}
	var out []string
	for _, p := range []string{filepath.Join(c.home, ".gitconfig"), filepath.Join(xdg, "git", "config"), filepath.Join(xdg, "git", "attributes")} {
		out = append(out, c.linksOn(p)...)
		if r, err := c.fs.resolve(p); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// maxLinksOn bounds linksOn: the kernel follows at most 40 links in one lookup.
const maxLinksOn = 40

// linksOn returns the symbolic links resolving p follows, each at its path through no link: those
// on p's own way, then those on the way of their targets.
func (c *compiler) linksOn(p string) []string {
	var out []string
	for queue := []string{p}; len(queue) > 0 && len(out) < maxLinksOn; queue = queue[1:] {
		for d := filepath.Clean(queue[0]); d != filepath.Dir(d); d = filepath.Dir(d) {
			dir, err := c.fs.resolve(filepath.Dir(d))
			if err != nil {
				break
			}
			at := filepath.Join(dir, filepath.Base(d))
			st, err := c.fs.lstat(at)
			if err != nil || st.Mode()&os.ModeSymlink == 0 || slices.Contains(out, at) {
				continue
			}
			out = append(out, at)
			if target, err := c.fs.readlink(at); err == nil {
				queue = append(queue, absFrom(dir, target))
			}
		}
	}
	return out
}

// priorOf returns what the snapshot keeps of c to put it back: a link's target, or a regular file
// whole (not one larger than maxControlRead).
func priorOf(c control) (priorFile, bool) {
	if target, ok := strings.CutPrefix(c.fp, "link:"); ok {
		return priorFile{link: target}, true
	}
	var perm uint32
	var size int
	if _, err := fmt.Sscanf(c.fp, "file:%o:%d:", &perm, &size); err != nil || size != len(c.data) {
		return priorFile{}, false
	}
	return priorFile{data: c.data, perm: perm}, true
}

// maxControlRead is the most bytes of one control file the guard hashes or parses.
const maxControlRead = 1 << 20

// fingerprint identifies the content of name in dirFD: a link by its target, a regular file by its
// permission bits, size and a hash of its content (data, up to maxControlRead bytes; a larger file
// also by its inode and change time), anything else by its type.
func fingerprint(dirFD int, name string) (fp string, data []byte) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "missing", nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, _ := unix.Readlinkat(dirFD, name, buf)
		return "link:" + string(buf[:max(n, 0)]), nil
	case unix.S_IFREG:
		data, err := readAt(dirFD, name)
		if err != nil {
			return "unreadable", nil
		}
		sum := sha256.Sum256(data)
		fp := fmt.Sprintf("file:%o:%d:%s", st.Mode&0o7777, st.Size, hex.EncodeToString(sum[:]))
		if st.Size > maxControlRead {
			fp += fmt.Sprintf(":%d:%d.%d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec) // past what was hashed
		}
		return fp, data
	}
	return fmt.Sprintf("type:%o", st.Mode&unix.S_IFMT), nil
}

// readAt reads at most maxControlRead bytes of the regular file name in dirFD, not following a link.
func readAt(dirFD int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxControlRead))
}

// judge neutralises one control file the call created or changed, if it is unsafe. prior is what
// the file was before the call, if it existed: a config keeps what it held then, and anything else
// found unsafe is put back as it was.
func judge(c control, dirs map[string]bool, roots []string, prior *priorFile) (*GitFinding, error) {
	dir, name := filepath.Split(c.path)
	dfd, err := openBeneath(c.root, dir)
	if err != nil {
		return nil, fmt.Errorf("git check of %s: %w", c.path, err)
	}
	defer unix.Close(dfd)
	j := judgement{dfd: dfd, path: c.path, prior: prior}
	if err := unix.Fstatat(dfd, name, &j.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, nil // gone since the walk
	}
	if j.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return j.neutralise("it is not a regular file (a link or other file in place of one git or another tool reads for programs to run)")
	}
	if j.st.Size > maxControlRead {
		// Only the first maxControlRead bytes would be judged, and the tools read it all.
		return j.neutralise(fmt.Sprintf("it is larger than the %d bytes clihost checks", maxControlRead))
	}
	data, err := readAt(dfd, name)
	if err != nil {
		return j.neutralise("it could not be read: " + err.Error())
	}
	switch c.kind {
	case ctlHook:
		return j.neutralise("git would run it (a hook) or the drivers it names (an attributes file)")
	case ctlRunConfig:
		if c.run.risky(data) {
			return j.neutralise(c.run.tool + " would run a program it names")
		}
		return nil, nil
	case ctlTodo:
		if todoExecs(data) {
			return j.neutralise("it is a todo list with an exec line, which `git rebase --continue` runs")
		}
		return nil, nil
	case ctlPointer:
		target, ok := pointerTarget(name, data)
		if !ok {
			return j.neutralise("it is not a plain path to a git directory, so git would read it in ways clihost does not check")
		}
		if r, ok := resolveNoLinks(filepath.Clean(dir), target); !ok || !dirs[r] {
			return j.neutralise("it points git at " + strconv.Quote(target) + ", which is not a checked git directory in a writable root (or is reached through a symbolic link)")
		}
		return nil, nil
	}
	var before []gitEntry
	if prior != nil {
		before, _ = parseGitConfig(prior.data)
	}
	ctx := valueContext{resolveInside: func(p string) bool {
		r, ok := resolveNoLinks(filepath.Clean(dir), p)
		return ok && slices.ContainsFunc(roots, func(w string) bool { return within(r, w) })
	}, before: before}
	out, dropped, clean := filterGitConfig(data, ctx)
	if clean {
		return nil, nil
	}
	return j.rewrite(out, dropped)
}

// judgement is one control file being neutralised: its directory, its path, what it was before
// the call, and what it is now.
type judgement struct {
	dfd   int
	path  string
	prior *priorFile
	st    unix.Stat_t
}

// pointerTarget returns the path a gitfile ("gitdir: PATH") or commondir file names, trimmed as git
// trims it.
func pointerTarget(name string, data []byte) (string, bool) {
	s := strings.TrimRight(string(data), "\r\n")
	if name == ".git" {
		var ok bool
		if s, ok = strings.CutPrefix(s, "gitdir: "); !ok {
			return "", false
		}
	}
	if s == "" || strings.ContainsAny(s, "\n\x00") {
		return "", false
	}
	return s, true
}

// resolveNoLinks resolves target (relative to base when not absolute) component by component,
// failing on a symbolic link or a missing component, so that ".." means what the kernel makes of it.
func resolveNoLinks(base, target string) (string, bool) {
	if !filepath.IsAbs(target) {
		target = base + "/" + target
	}
	at, isLink, ok := firstLink(target)
	return at, ok && !isLink
}

// todoExecs reports whether a rebase or sequencer todo list holds an exec command.
func todoExecs(data []byte) bool {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) > 0 && (string(fields[0]) == "x" || string(fields[0]) == "exec") {
			return true
		}
	}
	return false
}

// openBeneath opens dir (absolute, inside root) as a path descriptor, refusing any symbolic link on
// the way and anything outside root.
func openBeneath(root, dir string) (int, error) {
	rootFD, err := unix.Openat2(unix.AT_FDCWD, root, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rootFD)
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat2(rootFD, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", dir, err)
	}
	return fd, nil
}

// moveAside renames name in dfd to a free quarantine name and makes it owner-only when it is a
// regular file. It returns the new path.
func moveAside(dfd int, path string) (string, error) {
	name := filepath.Base(path)
	for i := 0; i < 100; i++ {
		dst := name + quarantineSuffix
		if i > 0 {
			dst += "." + strconv.Itoa(i)
		}
		err := unix.Renameat2(dfd, name, dfd, dst, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("quarantine %s: %w", path, err)
		}
		if fd, err := unix.Openat(dfd, dst, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				_ = unix.Fchmod(fd, 0o600)
			}
			unix.Close(fd)
		}
		return filepath.Join(filepath.Dir(path), dst), nil
	}
	return "", fmt.Errorf("quarantine %s: no free name", path)
}

// neutralise moves the file aside and, when it existed before the call, puts back what it was.
func (j judgement) neutralise(why string) (*GitFinding, error) {
	moved, err := moveAside(j.dfd, j.path)
	if err != nil {
		return nil, err
	}
	f := &GitFinding{Path: j.path, Action: "quarantined", Moved: moved, Why: why}
	if j.prior == nil {
		return f, nil
	}
	name := filepath.Base(j.path)
	if j.prior.link != "" {
		err = unix.Symlinkat(j.prior.link, j.dfd, name)
		if err == nil {
			err = unix.Fchownat(j.dfd, name, int(j.st.Uid), int(j.st.Gid), unix.AT_SYMLINK_NOFOLLOW)
		}
	} else {
		err = j.create(j.prior.data, j.prior.perm)
	}
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", j.path, err)
	}
	f.Action = "restored"
	return f, nil
}

// rewrite moves a config aside and writes out in its place, with the original's owner and mode.
func (j judgement) rewrite(out []byte, dropped []string) (*GitFinding, error) {
	moved, err := moveAside(j.dfd, j.path)
	if err != nil {
		return nil, err
	}
	if err := j.create(out, j.st.Mode&0o666); err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", j.path, err)
	}
	why := "it set variables a call may not set"
	if len(dropped) == 0 {
		why = "it was not in the plain form git writes"
	}
	return &GitFinding{Path: j.path, Action: "rewritten", Moved: moved, Dropped: dropped, Why: why}, nil
}

// create makes the file anew (it must not exist: it was just moved aside) with data and perm, owned
// by the owner of what was there.
func (j judgement) create(data []byte, perm uint32) error {
	fd, err := unix.Openat(j.dfd, filepath.Base(j.path), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), j.path)
	_, err = f.Write(data)
	return errors.Join(err, f.Chown(int(j.st.Uid), int(j.st.Gid)), f.Chmod(os.FileMode(perm&0o777)), f.Close())
}
