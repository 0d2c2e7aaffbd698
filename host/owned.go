package host

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/kernfile"
	"github.com/clihost/clihost/internal/mountinfo"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// OwnedOverlap refuses, with workspace_denied, a workspace ws that is, contains or lies inside a
// path the host later executes or trusts: its state directory stateDir ("" for none: bin/ holds
// the CLIs Install put there, which later calls run, and homes/ the HOMEs it keeps for each uid,
// whose .bashrc, .gitconfig and .npmrc later calls read), the folder of the clihost-sandbox
// helper when one is used (every sandbox starts from it, unconfined), and each of trusted (for
// clihostd: its approval policy, whoever writes it approves every call, and its own folder, from
// which the service manager starts its next run). A tool allowed to write its workspace
// (fs.write ./**) could otherwise plant a program that runs with another bundle's credentials,
// another uid's rights, or the host's own. Symbolic links are resolved in every path first (the
// part that exists), so a workspace reaching a folder through a link, or one made after the host
// started, is judged by where it leads; and the mount table is read, so a bind mount of the path
// inside the workspace (or of the workspace inside it) is seen too.
func OwnedOverlap(ws, stateDir string, trusted ...string) *Error {
	w, err := ResolvedPath(ws)
	if err != nil {
		return &Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("workspace %q: %v", ws, err)}
	}
	return ownedOverlap(ws, w, stateDir, new(mountTable), trusted)
}

// ownedOverlap is OwnedOverlap of ws, resolved to w, with the mount table mounts (read once, when
// a path needs it).
func ownedOverlap(ws, w, stateDir string, mounts *mountTable, trusted []string) *Error {
	if stateDir != "" {
		s, err := ResolvedPath(stateDir)
		if err == nil && overlaps(w, s, mounts) {
			return ownedError(ws, "clihost's state directory "+stateDir+" (its bin/ holds the installed CLIs later calls run, its homes/ the HOMEs it keeps)",
				"name a workspace that neither holds nor lies in the state directory (a project folder), or move the state elsewhere (clihostd --state)")
		}
	}
	if helper, ok := nsinit.Starter(); ok {
		trusted = append(slices.Clone(trusted), filepath.Dir(helper))
	}
	for _, p := range trusted {
		if r, err := ResolvedPath(p); err == nil && overlaps(w, r, mounts) {
			return ownedError(ws, p+", which the host runs or trusts (the sandbox helper's or clihostd's folder, or the approval policy)",
				"name a workspace that neither holds nor lies in it (a project folder), or move it out of the workspace (install clihostd in /usr/local/bin; clihostd --approvals)")
		}
	}
	return nil
}

// ownedError is the workspace_denied refusal of ws, which overlaps what.
func ownedError(ws, what, hint string) *Error {
	return &Error{Code: errcode.WorkspaceDenied, Category: "permission",
		Message: fmt.Sprintf("the workspace %s holds or lies in %s: a tool allowed to write its workspace could change it, so it is refused", ws, what),
		Hint:    hint}
}

// ResolvedPath is p absolute and clean with the symbolic links of its existing part resolved (the
// rest may not exist yet).
func ResolvedPath(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...), nil
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// ownKeptHome reports whether ws is home, the kept home <state>/homes/<uid> of the uid a process
// runs as (where the host runs its own version checks when that uid may not use the workspace).
func (h *Host) ownKeptHome(ws, home string) bool {
	if h.opts.Sandbox.StateDir == "" {
		return false
	}
	w, err1 := ResolvedPath(ws)
	hm, err2 := ResolvedPath(home)
	homes, err3 := ResolvedPath(filepath.Join(h.opts.Sandbox.StateDir, "homes"))
	return err1 == nil && err2 == nil && err3 == nil && w == hm && filepath.Dir(hm) == homes
}

// overlaps reports whether the workspace w and the path p (both resolved) are one, or one holds the
// other: by their paths, or through a mount that shows the same folder of a file system at another
// place (a bind mount of p inside w, or w inside a bind mount of p). mounts is the mount table, read
// on first use and shared by the checks of one workspace.
func overlaps(w, p string, mounts *mountTable) bool {
	if within(w, p) || within(p, w) {
		return true
	}
	entries, err := mounts.entries()
	if err != nil {
		return false
	}
	fsP, relP := onFS(entries, p)
	fsW, relW := onFS(entries, w)
	if fsP != "" && fsP == fsW && (within(relW, relP) || within(relP, relW)) {
		return true // w lies in p, or holds it, on their file system (w reached through a bind mount)
	}
	for _, m := range entries {
		if within(m.point, w) && m.dev == fsP && (within(relP, m.root) || within(m.root, relP)) {
			return true // a mount inside w shows p, or a folder inside p
		}
	}
	return false
}

// mountTable is this process's mount table for the checks of one workspace, read on first use
// (readMountinfo): one look for all the paths a workspace is checked against (the state
// directory, the helper's folder, each trusted path), not one per path.
type mountTable struct {
	read bool
	list []mountEntry
	err  error
}

// entries returns the table, taking it the first time.
func (m *mountTable) entries() ([]mountEntry, error) {
	if !m.read {
		m.list, m.err = readMountinfo()
		m.read = true
	}
	return m.list, m.err
}

// mountEntry is one line of /proc/self/mountinfo: the file system (major:minor), the folder of it
// mounted, and where.
type mountEntry struct{ dev, root, point string }

// readMountinfo reads this process's mount table. It is read at every check, never kept (only
// the parse of a text that reads the same as the last is reused, lastMounts): the POLLPRI event
// of /proc/self/mountinfo reports mounts, unmounts and moves, but not a rename of a folder
// holding a mount point, which moves the mount in the table all the same (a bind mount of the
// state directory inside a folder then renamed to the workspace's name).
func readMountinfo() ([]mountEntry, error) {
	b, err := kernfile.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	lastMounts.Lock()
	defer lastMounts.Unlock()
	if !bytes.Equal(b, lastMounts.text) {
		lastMounts.text, lastMounts.list = b, parseMountinfo(b)
	}
	return lastMounts.list, nil
}

// lastMounts is the last mount table readMountinfo read, and its entries: a table whose text has
// not changed since (the common case: every call reads it) is not parsed again. Its entries are
// shared and never written.
var lastMounts struct {
	sync.Mutex
	text []byte
	list []mountEntry
}

// parseMountinfo reads the entries of the text of /proc/self/mountinfo.
func parseMountinfo(b []byte) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		out = append(out, mountEntry{dev: f[2], root: mountinfo.Unescape(f[3]), point: mountinfo.Unescape(f[4])})
	}
	return out
}

// onFS is the file system p lies on (the last mount whose point holds p, as the kernel shows the
// topmost) and p's folder within it; "" when none does.
func onFS(mounts []mountEntry, p string) (dev, rel string) {
	best := -1
	for i, m := range mounts {
		if within(p, m.point) && (best < 0 || len(m.point) >= len(mounts[best].point)) {
			best = i
		}
	}
	if best < 0 {
		return "", ""
	}
	m := mounts[best]
	return m.dev, filepath.Join(m.root, strings.TrimPrefix(p, m.point))
}

// OwnedOrTempOverlap is OwnedOverlap, and it also refuses a workspace ws that is or holds the
// temporary folder (os.TempDir, symbolic links resolved): the host writes the env files of
// container calls (their environment) and the folders of version checks there, as its own
// user, and a tool of a host that is not root runs as that user too. clihostd applies it to every
// workspace; the Go API does not (a program whose CLIs only read may use os.TempDir() as its
// workspace). The mount table is read once for both.
func OwnedOrTempOverlap(ws, stateDir string, trusted ...string) *Error {
	w, err := ResolvedPath(ws)
	if err != nil {
		return &Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("workspace %q: %v", ws, err)}
	}
	var mounts mountTable
	if e := ownedOverlap(ws, w, stateDir, &mounts, trusted); e != nil {
		return e
	}
	// Lying inside it is fine (the host's folders there are beside the workspace, not in it);
	// holding it, by path or through a mount, is not.
	if tmp, err := ResolvedPath(os.TempDir()); err == nil && (within(tmp, w) || overlaps(w, tmp, &mounts) && !within(w, tmp)) {
		return ownedError(ws, "the temporary folder "+os.TempDir()+" (the env files of container calls and the folders of version checks are made there)",
			"name a workspace that does not hold the temporary folder (a project folder)")
	}
	return nil
}
