package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/clihost/clihost/manifest"
	"golang.org/x/sys/unix"
)

// credentialPaths (relative to the calling user's home) hold other programs' credentials. They
// are always masked, except those the bundle itself declares (see declares): gh declaring
// ~/.config/gh/** keeps ~/.config/gh. A broader grant (~/**, or a workspace that is the home)
// never lifts them.
var credentialPaths = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".config/gcloud", ".docker", ".netrc",
	".git-credentials", ".config/git/credentials", ".npmrc", ".pypirc",
	".cargo/credentials", ".cargo/credentials.toml", ".config/gh", ".local/share/keyrings",
}

// shellStartupFiles (relative to home) run as the user at the next login, shell or desktop session:
// a write there outlives the sandbox. They are always masked, declared or not (they also often
// export tokens). .bash_aliases is sourced by Debian's .bashrc; the desktop and systemd --user
// directories start programs at login. .config/containers is the rootless container runtime's
// configuration, which the podman clihost starts for an engine: sandbox call reads outside any
// sandbox (containers.conf's engine.runtime, conmon_path and hooks_dir name programs it runs, its
// default volumes mount the host into every container).
var shellStartupFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".config/fish/config.fish", ".config/fish/conf.d",
	".pam_environment", ".xprofile", ".xsessionrc", ".xinitrc", ".config/environment.d",
	".config/autostart", ".config/systemd/user", ".config/containers",
}

// homeBinDirs (relative to home) are on the user's PATH (Debian's .profile adds them): a program
// written there would shadow the user's own commands. They stay readable and executable (pipx and
// pip --user install CLIs there) but are read-only inside every sandbox whose writable trees hold
// them (Policy.Protect); one that does not exist is a deny path, so that a call creating it in a
// writable tree has it swept.
var homeBinDirs = []string{".local/bin", "bin"}

// daemonSockets control container runtimes or the system bus: talking to any of them is root or
// a way out of the sandbox. Always masked.
var daemonSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
	"/run/podman/podman.sock", "/run/dbus/system_bus_socket",
}

// runStateDirs hold the sockets of the host's local services (PostgreSQL, nscd, systemd, …).
// Landlock below ABI 9 cannot refuse connect(2) on a pathname socket, and the read-only root shows
// every one whose mode lets anyone connect, so these directories are masked whole unless the
// manifest declares a path in them.
var runStateDirs = []string{"/run", "/var/run"}

// runtimeDirSockets (relative to $XDG_RUNTIME_DIR) are the per-user equivalents: the session bus,
// rootless docker and podman, and gpg-agent. Always masked; so is $SSH_AUTH_SOCK.
var runtimeDirSockets = []string{"bus", "docker.sock", "podman/podman.sock", "gnupg"}

// writableRootMasks (relative to each writable directory) are run by the user's own tools later:
// git hooks, git config (core.fsmonitor, core.hooksPath, credential.helper …) and editor task
// files. Masked in every writable root, existing or not, plus every nested git directory found.
var writableRootMasks = []string{".git/hooks", ".git/config", ".vscode", ".idea"}

// globMeta are the characters that make a pattern component a glob (doublestar's, and its escape).
const globMeta = "*?[{\\"

// errBudget stops a compile-time walk that went over the budget.
var errBudget = errors.New("over the expansion budget")

// mandatoryDenies adds the denies every call gets (research/sandbox.md §5.4): other programs'
// credentials under home unless declared, shell startup files, container and bus sockets,
// Input.ExtraDeny, and the git and editor files of every writable root.
func (c *compiler) mandatoryDenies() error {
	for _, rel := range credentialPaths {
		p := filepath.Join(c.home, rel)
		if c.declares(p) {
			c.note("mandatory deny of ~/%s lifted: the manifest declares it", rel)
			continue
		}
		if err := c.denyFor(p, whyCredential); err != nil {
			return err
		}
	}
	for _, p := range runStateDirs {
		if c.declares(p) {
			c.note("mandatory deny of %s lifted: the manifest declares a path in it", p)
			continue
		}
		if err := c.denyFor(p, whyRunState); err != nil {
			return err
		}
	}
	paths := map[string][]string{whySocket: daemonSockets, whyStartup: homePaths(c.home, shellStartupFiles)}
	for _, p := range homePaths(c.home, homeBinDirs) {
		if _, err := c.fs.lstat(p); errors.Is(err, fs.ErrNotExist) {
			paths[whyHomeBin] = append(paths[whyHomeBin], p) // one the call creates is swept; an existing one is protected
		}
	}
	if dir := c.lookupAbs("XDG_RUNTIME_DIR"); dir != "" {
		for _, rel := range runtimeDirSockets {
			paths[whySession] = append(paths[whySession], filepath.Join(dir, rel))
		}
	}
	if sock := c.lookupAbs("SSH_AUTH_SOCK"); sock != "" {
		paths[whySession] = append(paths[whySession], sock)
	}
	for _, p := range c.in.ExtraDeny {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("extra deny %q is not an absolute path", p)
		}
		paths[whyHost] = append(paths[whyHost], p)
	}
	for _, why := range slices.Sorted(maps.Keys(paths)) {
		for _, p := range paths[why] {
			if err := c.denyFor(p, why); err != nil {
				return err
			}
		}
	}
	for _, w := range slices.Sorted(maps.Keys(c.writable)) {
		if err := c.writableMasks(w); err != nil {
			return fmt.Errorf("writable root %s: %w", w, err)
		}
	}
	return nil
}

// lookupAbs reads an absolute path from the caller's environment; "" when unset or relative.
func (c *compiler) lookupAbs(name string) string {
	if c.in.LookupEnv == nil {
		return ""
	}
	if v, ok := c.in.LookupEnv(name); ok && filepath.IsAbs(v) {
		return filepath.Clean(v)
	}
	return ""
}

// declares reports whether the manifest declares the credential path p, so that its mask is
// lifted: an allow pattern's static root (a literal or subtree path, a last-component wildcard's
// directory) is p; or lies inside p while no grant on an ancestor of p would then expose the rest
// of p (there Landlock grants only the declared part). In the last case the mask stays, and the
// declared rule inside it is dropped with a note.
func (c *compiler) declares(p string) bool {
	r, err := c.fs.resolve(p)
	if err != nil {
		return false
	}
	if slices.Contains(c.declared, r) {
		return true
	}
	if !slices.ContainsFunc(c.declared, func(d string) bool { return within(d, r) }) {
		return false
	}
	for g := range c.access {
		if g.Path != r && within(r, g.Path) {
			return false
		}
	}
	return true
}

// outermost returns the denied paths sorted, without those inside another denied path: masking a
// directory masks everything beneath it.
func outermost(denies map[string]bool) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(denies)) {
		inside := false
		for cur, a := p, filepath.Dir(p); !inside && a != cur; cur, a = a, filepath.Dir(a) {
			inside = denies[a]
		}
		if !inside {
			out = append(out, p)
		}
	}
	return out
}

// denyFor masks p: its parent directories resolved, and also its target when p is a symlink. why
// (one of the why* reasons) is recorded for Policy.Explain.
func (c *compiler) denyFor(p, why string) error {
	dir, err := c.fs.resolve(filepath.Dir(p))
	if err != nil {
		return fmt.Errorf("deny %s: %w", p, err)
	}
	lexical := filepath.Join(dir, filepath.Base(p))
	c.markDenied(lexical, why)
	if target, err := c.fs.evalSymlinks(lexical); err == nil {
		c.markDenied(target, why)
	}
	return nil
}

// markDenied adds p to the denied paths, keeping the first reason given for it.
func (c *compiler) markDenied(p, why string) {
	c.denies[p] = true
	if _, ok := c.why[p]; !ok && why != "" {
		c.why[p] = why
	}
}

// denyPattern expands one fs.deny pattern. A trailing /** is dropped (masking a directory masks
// everything beneath it); a literal is denied as is; a glob is expanded against the filesystem
// from its static prefix. A glob that cannot be expanded completely (more matches than the
// budget, more entries than the walk may read, an unreadable directory) is an error: nothing
// would mask its other matches (fail closed).
func (c *compiler) denyPattern(p string) error {
	if _, err := manifest.ClassifyPattern(p); err != nil {
		return err
	}
	trimmed := strings.TrimSuffix(p, "/")
	for trimmed == "**" || strings.HasSuffix(trimmed, "/**") {
		trimmed = strings.TrimSuffix(strings.TrimSuffix(trimmed, "**"), "/")
	}
	// The anchor (the workspace, the home) is a path, not a pattern: a [ or { in its name means
	// itself. So the pattern is split into its static part and the rest before it is anchored.
	if !strings.ContainsAny(trimmed, globMeta) {
		abs, _, err := c.anchor(trimmed)
		if err != nil {
			return err
		}
		return c.denyFor(abs, whyFSDeny)
	}
	static, rest := doublestar.SplitPattern(trimmed)
	base, _, err := c.anchor(unescapeMeta(static))
	if err != nil {
		return err
	}
	root, err := c.fs.resolve(base)
	if err != nil {
		return err
	}
	deny := func(rel string) error { return c.denyFor(filepath.Join(root, rel), whyFSDeny) }
	var complete bool
	name, anyDepth := strings.CutPrefix(rest, "**/")
	switch {
	case !strings.Contains(rest, "/"):
		complete, err = c.denyMatches(root, rest, deny)
	case anyDepth && !strings.Contains(name, "/") && !strings.Contains(name, "**"):
		complete, err = c.denyWalk(root, name, deny)
	default:
		complete, err = c.expand(root, rest, deny)
	}
	if err != nil {
		return err
	}
	if !complete {
		return fmt.Errorf("%w: %s could not be expanded completely (at most %d matches and %d directory entries read, every directory readable): "+
			"its other matches would not be masked; narrow the fs.read/fs.write grants or the fs.deny pattern", ErrDenyIncomplete, filepath.Join(root, rest), c.budget, c.budget*walkFactor)
	}
	return nil
}

// unescapeMeta returns the path a glob's static part names: each character after a backslash as
// itself.
func unescapeMeta(static string) string {
	var b strings.Builder
	for i := 0; i < len(static); i++ {
		if static[i] == '\\' && i+1 < len(static) {
			i++
		}
		b.WriteByte(static[i])
	}
	return b.String()
}

// denyMatches is expand for a pattern of one path component (~/.ssh/id_*): the folder root's
// matching names, from a listing the journal records (so that the policy can be kept), within the
// same bounds.
func (c *compiler) denyMatches(root, pattern string, deny func(name string) error) (complete bool, err error) {
	names, entries, err := c.matches(root, pattern)
	if err != nil || entries > c.budget*walkFactor || len(names) > c.budget {
		return false, err
	}
	for _, name := range names {
		if err := deny(name); err != nil {
			return false, err
		}
	}
	return true, nil
}

// denyWalk is expand for a pattern **/NAME, NAME one path component (**/.env, **/*.pem): every
// entry whose name matches NAME under root, at any depth, the folders walked without following a
// link and each listing recorded in the journal (so that the policy can be kept), within expand's
// bounds; complete is false past them or at a folder it could not read.
func (c *compiler) denyWalk(root, name string, deny func(rel string) error) (complete bool, err error) {
	visits, found, limit := 0, 0, c.budget*walkFactor
	var walk func(dir, rel string) (bool, error)
	walk = func(dir, rel string) (bool, error) {
		entries, err := c.listFolder(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			return true, nil // gone, or not a folder: nothing under it to mask
		case err != nil:
			return false, nil
		}
		if visits += len(entries); visits > limit {
			return false, nil
		}
		for _, e := range entries {
			if ok, _ := doublestar.Match(name, e.name); ok {
				if found++; found > c.budget {
					return false, nil
				}
				if err := deny(filepath.Join(rel, e.name)); err != nil {
					return false, err
				}
			}
		}
		for _, e := range entries {
			if e.typ.IsDir() {
				if ok, err := walk(filepath.Join(dir, e.name), filepath.Join(rel, e.name)); !ok || err != nil {
					return ok, err
				}
			}
		}
		return true, nil
	}
	return walk(root, "")
}

// ErrDenyIncomplete is returned by Compile when an fs.deny glob cannot be fully expanded.
var ErrDenyIncomplete = errors.New("deny pattern over the expansion bound")

// expand calls fn for each match of pattern under root (symlinks are not followed), with rel the
// match's path relative to root. It stops after c.budget matches or c.budget×walkFactor visited
// entries; complete is false then, or when a directory could not be read.
func (c *compiler) expand(root, pattern string, fn func(rel string) error) (complete bool, err error) {
	c.fs.asked.markOpaque("a glob expanded against the file system")
	bfs := &budgetFS{fsys: os.DirFS(root), left: c.budget * walkFactor}
	matches := 0
	err = doublestar.GlobWalk(bfs, pattern, func(rel string, _ fs.DirEntry) error {
		if matches++; matches > c.budget {
			bfs.partial = true
			return errBudget
		}
		return fn(rel)
	}, doublestar.WithNoFollow())
	if err != nil && !errors.Is(err, errBudget) {
		return false, fmt.Errorf("expand %s under %s: %w", pattern, root, err)
	}
	return !bfs.partial, nil
}

// matches returns the names of the entries of the folder dir that match pattern (one path
// component), in name order, and how many entries it holds. It lists dir as folderListing does,
// the listing recorded in the journal; a folder that is missing, or a file, holds none.
func (c *compiler) matches(dir, pattern string) (names []string, entries int, err error) {
	listed, err := c.listFolder(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range listed {
		if ok, _ := doublestar.Match(pattern, e.name); ok {
			names = append(names, e.name)
		}
	}
	slices.Sort(names)
	return names, len(listed), nil
}

// budgetFS counts the directory entries a walk reads and refuses to read more than left; partial
// records that it refused or that a directory could not be read.
type budgetFS struct {
	fsys    fs.FS
	left    int
	partial bool
}

// Open opens a file of the underlying filesystem.
func (b *budgetFS) Open(name string) (fs.File, error) { return b.fsys.Open(name) }

// Stat stats a file of the underlying filesystem.
func (b *budgetFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(b.fsys, name) }

// ReadDir reads a directory while the budget lasts.
func (b *budgetFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if b.left < 0 {
		return nil, errBudget
	}
	entries, err := fs.ReadDir(b.fsys, name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		b.partial = true
	}
	if b.left -= len(entries); b.left < 0 {
		b.partial = true
		return nil, errBudget
	}
	return entries, err
}

// writableMasks masks the git directory w lies in, if any, and, when w is a directory,
// writableRootMasks under it and every git directory found beneath it within the walk bound.
// Past the bound, the git rule (SnapshotGit and Sweep, which read the same number of entries and
// refuse a larger root) judges the git metadata the call leaves instead.
func (c *compiler) writableMasks(w string) error {
	if i := strings.LastIndex(w+"/", "/.git/"); i >= 0 {
		if err := c.gitDirMasks(w[:i+len("/.git")]); err != nil {
			return err
		}
	}
	if st, err := c.fs.stat(w); err != nil || !st.IsDir() {
		return nil
	}
	for _, rel := range writableRootMasks {
		if err := c.denyFor(filepath.Join(w, rel), whyWritableMask); err != nil {
			return err
		}
	}
	complete, err := c.findGitDirs(w)
	if err != nil {
		return err
	}
	if !complete {
		c.note("writable root %s: the search for nested git directories stopped at %d entries or an unreadable directory; the git rule checks their hooks and config after the call", w, c.budget*walkFactor)
	}
	return nil
}

// findGitDirs walks w (without following symlinks, within c.budget×walkFactor entries) for
// entries named .git and masks the git directories they are or point to. It does not descend into
// a git directory: gitDirMasks searches the parts of one that hold other git directories.
// complete is false when the walk stopped at the budget or a directory could not be read (the
// walk goes on past it). The journal records each folder's listing and each leaf answer, and what
// is read to follow a .git found (see gitDirMasks and gitfileMasks).
func (c *compiler) findGitDirs(w string) (complete bool, err error) {
	visits, limit := 0, c.budget*walkFactor
	// found masks what an entry named .git is or points to; hard is set when a mask failed.
	var hard error
	// skipped is set when a folder below w could not be read: the search goes on past it (the
	// folders after it hold repositories too), and reports itself incomplete.
	skipped := false
	found := func(p string, typ fs.FileMode) {
		if typ.IsRegular() {
			hard = c.gitfileMasks(p)
			return
		}
		switch st, err := c.fs.stat(p); {
		case err != nil:
		case st.IsDir():
			hard = c.gitDirMasks(p)
		case st.Mode().IsRegular():
			hard = c.gitfileMasks(p) // a link to a gitfile: git reads it as one
		}
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := c.listFolder(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if visits++; visits > limit {
				return errBudget
			}
			p := filepath.Join(dir, e.name)
			switch {
			case e.name == ".git":
				if found(p, e.typ); hard != nil {
					return hard
				}
			case e.typ.IsDir():
				n, ok := gitWalkLeaf(p)
				c.fs.asked.leaf(p, n, ok)
				if ok {
					if visits += n; visits > limit {
						return errBudget
					}
					continue
				}
				if err := walk(p); err != nil {
					if errors.Is(err, errBudget) || hard != nil {
						return err
					}
					skipped = true
				}
			}
		}
		return nil
	}
	visits++ // the root, as a walk of it counts it
	if filepath.Base(w) == ".git" {
		found(w, fs.ModeDir)
		return hard == nil, hard
	}
	walkErr := walk(w)
	if hard != nil {
		return false, hard
	}
	return walkErr == nil && !skipped, nil
}

// listFolder is folderListing of dir, the answer recorded in the compilation's journal: every
// listing a compilation decides on goes through it, so that a kept policy asks it again.
func (c *compiler) listFolder(dir string) ([]dirEntry, error) {
	entries, err := folderListing(dir)
	c.fs.asked.listing(dir, entries, err)
	return entries, err
}

// folderListing returns the entries of the folder dir as the compiler's listings read them (the
// git search's walks, a wildcard's folder, a deny walk), and as its journal asks them again:
// opened without following a link, through the kept listings (readEntries). A folder whose listing
// is kept is not opened: its stamp, asked by path as the open resolves it, names its entries (one
// system call instead of four, for every folder a kept policy's journal asks again).
func folderListing(dir string) ([]dirEntry, error) {
	if st, ok := statFolder(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW); ok && st.dir {
		if kept, ok := listings.get(st); ok {
			return kept, nil
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close() // before the walk descends: a deep tree must not hold a descriptor per level
	return readEntries(f, fd, func(int) error { return nil })
}

// gitWalkLeaf reports, for findGitDirs, an unchanged folder p with no folder and no .git in it,
// and how many entries it holds (see keptLeaf).
func gitWalkLeaf(p string) (int, bool) {
	st, ok := statFolder(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW)
	if !ok {
		return 0, false
	}
	return keptLeaf(st, func(name string) bool { return name == ".git" })
}

// gitDirMasks masks a git directory's hooks and config, those of the common directory its
// commondir names (a worktree's: git reads hooks and config there), and those of the submodule
// and worktree git directories inside it (a directory holding HEAD under modules/ or worktrees/).
func (c *compiler) gitDirMasks(g string) error {
	root, err := c.fs.resolve(g)
	if err != nil {
		return err
	}
	if c.gitDirs[root] {
		return nil // masked already (a commondir leads back to its worktrees' common directory)
	}
	if c.gitDirs == nil {
		c.gitDirs = map[string]bool{}
	}
	c.gitDirs[root] = true
	for _, name := range []string{"hooks", "config"} {
		if err := c.denyFor(filepath.Join(g, name), whyWritableMask); err != nil {
			return err
		}
	}
	if err := c.commonDirMasks(root); err != nil {
		return err
	}
	complete, err := c.nestedGitDirs(root, func(sub string) error {
		for _, name := range []string{"hooks", "config", "config.worktree"} {
			if _, err := c.fs.lstat(filepath.Join(sub, name)); err == nil {
				if err := c.denyFor(filepath.Join(sub, name), whyWritableMask); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !complete {
		c.note("git directory %s: the search for submodule and worktree git directories stopped at the budget; the git rule checks their hooks and config after the call", root)
	}
	return nil
}

// nestedGitDirs calls fn for each folder under root's modules/ and worktrees/ (root a git
// directory, its links resolved) that holds an entry named HEAD: the git directories of its
// submodules and worktrees. It walks them as findGitDirs walks a writable folder (no link
// followed below modules/ and worktrees/ themselves, each listing recorded in the journal),
// reading at most c.budget×walkFactor entries and taking at most c.budget folders; complete is
// false when it stopped there or met a folder it could not read (which it walks past).
func (c *compiler) nestedGitDirs(root string, fn func(sub string) error) (complete bool, err error) {
	visits, matches, limit := 0, 0, c.budget*walkFactor
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := c.listFolder(dir)
		if err != nil {
			return err
		}
		if visits += len(entries); visits > limit {
			return errBudget
		}
		for _, e := range entries {
			if e.name != "HEAD" {
				continue
			}
			if matches++; matches > c.budget {
				return errBudget
			}
			if err := fn(dir); err != nil {
				return &maskError{err}
			}
			break
		}
		for _, e := range entries {
			if e.typ.IsDir() {
				if err := walk(filepath.Join(dir, e.name)); err != nil {
					var hard *maskError
					if errors.Is(err, errBudget) || errors.As(err, &hard) {
						return err
					}
					complete = false // a folder it cannot read: the walk goes on past it
				}
			}
		}
		return nil
	}
	complete = true
	for _, top := range []string{"modules", "worktrees"} {
		// A link there is followed (as the glob this walk replaced did); below, none is.
		p, err := c.fs.evalSymlinks(filepath.Join(root, top))
		if err != nil {
			continue // missing: git finds no git directory there either
		}
		if fi, err := c.fs.lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := walk(p); err != nil {
			var hard *maskError
			if errors.As(err, &hard) {
				return false, hard.err
			}
			complete = false
		}
	}
	return complete, nil
}

// maskError carries, through nestedGitDirs's walk, a failure of its fn: that one ends the
// compilation, where a folder that could not be read or the budget only ends the search.
type maskError struct{ err error }

func (e *maskError) Error() string { return e.err.Error() }

// gitfileMasks follows a `.git` file (gitdir: PATH, as submodules and worktrees have) and masks
// that git directory when it lies in a writable root; outside them it cannot be written. PATH is
// read as git reads it (only the line end stripped) and resolved as the kernel resolves it (a ".."
// after a link goes up from the link's target).
func (c *compiler) gitfileMasks(p string) error {
	b, ok := c.readPointer(p)
	if !ok {
		return nil // unreadable now means unreadable to the CLI too: nothing to follow
	}
	dir, ok := pointerTarget(".git", b)
	if !ok {
		return nil
	}
	r, ok, err := c.pointedDir(filepath.Dir(p), dir)
	if err != nil || !ok {
		return err
	}
	return c.writableGitDirMasks(r)
}

// commonDirMasks masks the git directory the commondir file of the git directory root names,
// when there is one (a worktree's git directory: git reads hooks and config from there) and it
// lies in a writable root.
func (c *compiler) commonDirMasks(root string) error {
	p := filepath.Join(root, "commondir")
	if _, err := c.fs.lstat(p); err != nil {
		return nil // none: root is its own common directory
	}
	b, ok := c.readPointer(p)
	if !ok {
		return nil
	}
	target, ok := pointerTarget("commondir", b)
	if !ok {
		return nil
	}
	common, ok, err := c.pointedDir(root, target)
	if err != nil || !ok {
		return err
	}
	return c.writableGitDirMasks(common)
}

// writableGitDirMasks masks the git directory r (resolved) when it lies in a writable root; outside
// them it cannot be written, and its hooks and config stay readable as granted.
func (c *compiler) writableGitDirMasks(r string) error {
	for w := range c.writable {
		if within(r, w) {
			return c.gitDirMasks(r)
		}
	}
	return nil
}

// pointedDir resolves target, a path a gitfile or commondir in the folder base names (relative to
// base unless absolute), as the kernel does: not cleaned first, so that a ".." after a link goes up
// from the link's target. A target that does not exist yet resolves as far as it exists (its masks
// then stand for what a call may create there), and one behind a dangling link is an error (as a
// rule through it is: creating the link's target would redirect it); one that cannot resolve
// otherwise (through a file, a loop) names no git directory: false.
func (c *compiler) pointedDir(base, target string) (string, bool, error) {
	if !filepath.IsAbs(target) {
		target = base + "/" + target
	}
	r, err := c.fs.evalSymlinks(target)
	switch {
	case err == nil:
		return r, true, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	}
	if r, err = c.fs.resolve(target); err != nil {
		return "", false, err
	}
	return r, true, nil
}

// homePaths joins each of rels to home.
func homePaths(home string, rels []string) []string {
	out := make([]string, len(rels))
	for i, rel := range rels {
		out[i] = filepath.Join(home, rel)
	}
	return out
}
