package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/access"
	"github.com/clihost/clihost/sandbox"
)

// CallerID is the identity of a control-socket caller: its uid and primary gid (SO_PEERCRED) and
// its supplementary groups (SO_PEERGROUPS).
type CallerID struct {
	UID, GID int
	Groups   []int
}

// nobodyID is the identity of last resort on a root host: the kernel's overflow uid and gid.
const nobodyID = 65534

// identity is whom bundle processes run as, and the home directory ~ stands for.
type identity struct {
	id   sandbox.Identity
	home string
}

// identityFor decides who runs a process in the workspace ws (absolute) for caller (nil: an MCP
// agent or the host's own work), as docs/operations.md ("Identity: who runs, HOME, which
// workspace") states it:
//
//   - A host that is not root runs it as itself (in a user namespace, without capabilities), with
//     its own home ($HOME), unless that overlaps the state directory.
//   - A root host runs it as a caller that is not root, with the caller's primary and supplementary
//     groups; for anyone else as the agent user (SandboxOptions.AgentUID), else the workspace's
//     owner when that is not root, else nobody; never as root. That uid must be able to read, write
//     and search ws (asked of the kernel, as that uid): else workspace_denied, naming the fix.
//
// ~ is the uid's home from the password database when it exists, belongs to the uid and does not
// overlap the state directory; else <state>/homes/<uid>, made on first use.
//
// With bin set, a root host also asks, as that uid and in the same check as the workspace's,
// whether it may execute bin: one it cannot reach would fail inside the sandbox as a bare "exec:
// permission denied", blamed on the bundle's sandbox block; binary_denied names the folder.
func (h *Host) identityFor(ws string, caller *CallerID, bin string) (identity, *Error) {
	if os.Geteuid() != 0 {
		home, ok := h.opts.LookupEnv("HOME")
		if !ok || !filepath.IsAbs(home) {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return identity{}, &Error{Code: errcode.Internal, Message: "the calling user's home directory: " + err.Error()}
			}
		}
		id := sandbox.Identity{UID: os.Geteuid(), GID: os.Getegid()}
		if home = filepath.Clean(home); h.overlapsState(home) {
			var err error
			if home, err = h.keptHome(id, true); err != nil {
				return identity{}, &Error{Code: errcode.Internal, Message: err.Error()}
			}
		}
		return identity{id: id, home: home}, nil
	}
	if err := h.reachableState(); err != nil {
		return identity{}, &Error{Code: errcode.Internal, Message: "the state directory: " + err.Error()}
	}
	id := h.runAs(ws, caller)
	who := access.Who{UID: id.UID, GID: id.GID, Groups: id.Groups}
	// The workspace, the binary and a kept home are asked of the kernel together: one switch of
	// identity on one thread per call. A kept home not made yet is made only once the workspace
	// passed (a refused call leaves nothing behind), and asked about on its own then.
	home, kept, homeErr := h.homeCandidate(id, false)
	dirs := []string{ws}
	if kept {
		dirs = append(dirs, home)
	}
	dirErrs, binErr := access.CheckDirsExec(dirs, bin, who)
	if dirErrs[0] != nil {
		return identity{}, deniedError(ws, id.UID, caller, dirErrs[0])
	}
	if errors.Is(homeErr, errHomeNotMade) {
		home, homeErr = h.homeFor(id)
	}
	if homeErr != nil {
		return identity{}, &Error{Code: errcode.Internal, Message: homeErr.Error(), Hint: "check the state directory (clihostd --state) and its homes/ folder"}
	}
	if kept && dirErrs[1] != nil {
		home = noHome // see homeFor
	}
	if binErr != nil {
		return identity{}, binaryDenied(bin, id.UID, binErr)
	}
	return identity{id: id, home: home}, nil
}

// runAs chooses the uid, gid and groups of a root host's bundle process (see identityFor).
func (h *Host) runAs(ws string, caller *CallerID) sandbox.Identity {
	if caller != nil && caller.UID != 0 {
		return sandbox.Identity{UID: caller.UID, GID: nonRoot(caller.GID), Groups: withoutRoot(caller.Groups)}
	}
	if uid := h.opts.Sandbox.AgentUID; uid != 0 {
		gid := h.opts.Sandbox.AgentGID
		return sandbox.Identity{UID: uid, GID: nonRoot(gid), Groups: groupsOf(uid, gid)}
	}
	if st, err := os.Stat(ws); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 {
			uid, gid := int(sys.Uid), int(sys.Gid)
			if u, err := lookupUID(uid); err == nil {
				if g, err := strconv.Atoi(u.Gid); err == nil {
					gid = g
				}
			}
			return sandbox.Identity{UID: uid, GID: nonRoot(gid), Groups: groupsOf(uid, gid)}
		}
	}
	return sandbox.Identity{UID: nobodyID, GID: nobodyID}
}

// nonRoot is gid, or nobody's group in place of root's.
func nonRoot(gid int) int {
	if gid <= 0 {
		return nobodyID
	}
	return gid
}

// withoutRoot is groups without root's group (a bundle process never has it).
func withoutRoot(groups []int) []int {
	return slices.DeleteFunc(slices.Clone(groups), func(g int) bool { return g <= 0 })
}

// groupsOf lists the supplementary groups of uid in the group database, without its primary group
// gid and root's group; none when it cannot be read.
func groupsOf(uid, gid int) []int {
	ids, err := groupIDsOf(uid)
	if err != nil {
		return nil
	}
	var out []int
	for _, s := range ids {
		if g, err := strconv.Atoi(s); err == nil && g > 0 && g != gid {
			out = append(out, g)
		}
	}
	return out
}

// deniedError is the workspace_denied refusal of ws for uid (the uid a process would run as).
func deniedError(ws string, uid int, caller *CallerID, err error) *Error {
	name := userName(uid)
	msg := fmt.Sprintf("the workspace %s cannot be used by uid %d (%s), whom this call would run as: %s", ws, uid, name, reason(err))
	hint := fmt.Sprintf("run clihostd --agent-user NAME and grant NAME the workspace (setfacl -m u:NAME:rwX -R %s, "+
		"and setfacl -m u:NAME:x on each folder above it, or chown), or use a workspace that user owns", ws)
	if caller != nil && caller.UID != 0 {
		hint = fmt.Sprintf("use a workspace you (%s) may read, write and search, or have its owner grant it to you (setfacl -m u:%s:rwX -R %s)", name, name, ws)
	}
	return &Error{Code: errcode.WorkspaceDenied, Category: "permission", Message: msg, Hint: hint}
}

// binaryDenied is the refusal of a binary the uid a process would run as may not execute (a CLI
// installed under root's 0700 home, such as a pyenv shim, on a root host): code binary_denied,
// category permission, naming the binary, the uid and the folder it cannot search.
func binaryDenied(bin string, uid int, err error) *Error {
	name := userName(uid)
	return &Error{Code: errcode.BinaryDenied, Category: "permission",
		Message: fmt.Sprintf("uid %d (%s), whom this process would run as, cannot execute %s: %s", uid, name, bin, reason(err)),
		Hint: fmt.Sprintf("install the CLI where %s can run it (a system package, or a prefix outside a private home such as /opt or /usr/local), "+
			"or run clihostd --agent-user NAME with a user who can", name)}
}

// WorkspaceDenied is the refusal of a control-socket caller who names a workspace it may not use
// itself (code workspace_denied, category permission).
func WorkspaceDenied(ws string, caller CallerID, err error) *Error {
	name := userName(caller.UID)
	return &Error{Code: errcode.WorkspaceDenied, Category: "permission",
		Message: fmt.Sprintf("%s (uid %d) may not use the workspace %s: %s", name, caller.UID, ws, reason(err)),
		Hint:    fmt.Sprintf("name a workspace you may read, write and search yourself, or have its owner grant it to you (setfacl -m u:%s:rwX -R %s)", name, ws)}
}

// workspaceChanged refuses a control-socket caller's workspace ws whose path no longer leads to the
// directory that was checked for the caller: the daemon resolved ws (no symbolic links) and checked
// it, and it now resolves to now. A caller who can change a folder on the path (turn it into a
// symbolic link) must not get a directory it was never checked for.
func workspaceChanged(ws, now string) *Error {
	return &Error{Code: errcode.WorkspaceDenied, Category: "permission",
		Message: fmt.Sprintf("the workspace %s changed after its access check (it now leads to %s): refused", ws, now),
		Hint:    "name a workspace whose path nobody changes during the call (no symbolic link swapped into it)"}
}

// writableBy refuses, on a root host, a call whose writable roots (fs.write, ~ and symbolic links
// resolved) include one the uid it runs as may not write itself: a link in that uid's home
// (~/.cache/gh → another user's project) would otherwise make the host, which is root, act there
// after the call (the sweep of absent deny paths, the git rule's moves). A root that does not
// exist is left to the sandbox. A host that is not root acts as the uid that runs the call.
func writableBy(roots []string, id sandbox.Identity) *Error {
	if os.Geteuid() != 0 {
		return nil
	}
	var existing []string
	for _, w := range roots {
		if _, err := os.Lstat(w); !errors.Is(err, os.ErrNotExist) {
			existing = append(existing, w)
		}
	}
	// One check on one thread for all of them; the first refused is reported.
	if i, err := access.CheckWrites(existing, access.Who{UID: id.UID, GID: id.GID, Groups: id.Groups}); err != nil {
		return &Error{Code: errcode.PathDenied, Category: "permission",
			Message: fmt.Sprintf("%s, which the bundle's sandbox lets this call write (fs.write), is not writable by uid %d (%s), whom the call runs as: %s", existing[i], id.UID, userName(id.UID), reason(err)),
			Hint:    "a symbolic link in that user's home may lead there: point it at a folder that user owns, or remove it"}
	}
	return nil
}

// reason is why access.CheckDir refused, without repeating the path.
func reason(err error) string {
	var de *access.DeniedError
	if errors.As(err, &de) {
		return de.Reason
	}
	return err.Error()
}

// userName is uid's user name, or the uid when it has none.
func userName(uid int) string {
	if u, err := lookupUID(uid); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// noHome is the home of a uid that has none: it does not exist, so a CLI finds no configuration.
const noHome = "/nonexistent"

// homeFor is the home ~ stands for in a root host's process running as id: the password
// database's home of the uid when it exists, is a directory the uid owns, and does not overlap the
// state directory; else the home the host keeps for the uid when the uid can reach it; else
// /nonexistent.
func (h *Host) homeFor(id sandbox.Identity) (string, error) {
	home, kept, err := h.homeCandidate(id, true)
	if err != nil || !kept {
		return home, err
	}
	// A state directory the uid cannot reach (root's default, under /root): no home rather than an
	// unreadable one (a CLI treats a missing config as empty, an unreadable one as an error).
	if access.CheckDir(home, access.Who{UID: id.UID, GID: id.GID, Groups: id.Groups}) != nil {
		return noHome, nil
	}
	return home, nil
}

// homeCandidate is homeFor before the kernel is asked whether id may use a kept home: the
// password database's home (kept false), else the home the host keeps for id (kept true), made on
// first use when create is set (else errHomeNotMade), else /nonexistent (kept false).
func (h *Host) homeCandidate(id sandbox.Identity, create bool) (home string, kept bool, err error) {
	if u, err := lookupUID(id.UID); err == nil && filepath.IsAbs(u.HomeDir) {
		home := filepath.Clean(u.HomeDir)
		if st, err := os.Stat(home); err == nil && st.IsDir() && !h.overlapsState(home) {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == id.UID {
				return home, false, nil
			}
		}
	}
	home, err = h.keptHome(id, create)
	return home, err == nil && home != noHome, err
}

// overlapsState reports whether dir is, contains or lies inside the state directory.
func (h *Host) overlapsState(dir string) bool {
	state := h.opts.Sandbox.StateDir
	if state == "" {
		return false
	}
	return within(dir, state) || within(state, dir)
}

// within reports whether p is dir or lies inside it (both clean and absolute). (Without building
// dir+"/": it runs for every pair of paths a call's checks compare.)
func within(p, dir string) bool {
	d := strings.TrimSuffix(dir, "/")
	return p == dir || len(p) > len(d) && p[len(d)] == '/' && strings.HasPrefix(p, d)
}

// errHomeNotMade is keptHome's answer, without create, for a kept home not made yet.
var errHomeNotMade = errors.New("the kept home is not made yet")

// keptHome returns <state>/homes/<uid>, creating it (mode 0700, owned by the uid) on first use when
// create is set (without it, a root host answers errHomeNotMade then) and letting the uid reach it
// (the state directory and homes/ searchable, 0711); "/nonexistent" when the host has no state
// directory.
func (h *Host) keptHome(id sandbox.Identity, create bool) (string, error) {
	state := h.opts.Sandbox.StateDir
	if state == "" {
		return noHome, nil
	}
	homes := filepath.Join(state, "homes")
	home := filepath.Join(homes, strconv.Itoa(id.UID))
	if os.Geteuid() != 0 {
		// The host's own uid: no other user needs to reach it.
		if err := os.MkdirAll(home, 0o700); err != nil {
			return "", fmt.Errorf("the home kept for uid %d: %w", id.UID, err)
		}
		return home, nil
	}
	for _, dir := range []string{state, homes} {
		if err := searchable(dir); err != nil {
			return "", fmt.Errorf("the home kept for uid %d: %w", id.UID, err)
		}
	}
	if _, err := os.Lstat(home); errors.Is(err, os.ErrNotExist) {
		if !create {
			return "", errHomeNotMade
		}
		if err := makeHome(homes, home, id); err != nil {
			return "", fmt.Errorf("the home kept for uid %d: %w", id.UID, err)
		}
	}
	st, err := os.Lstat(home)
	if err != nil {
		return "", fmt.Errorf("the home kept for uid %d: %w", id.UID, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || !st.IsDir() || int(sys.Uid) != id.UID {
		return "", fmt.Errorf("the home kept for uid %d: %s is not a directory that uid owns", id.UID, home)
	}
	return home, nil
}

// makeHome makes home (in homes) owned by id, mode 0700, appearing whole: it is made and chowned
// under a temporary name, then renamed into place unless a call racing this one has put its own
// there first, so no call ever sees it owned by root.
func makeHome(homes, home string, id sandbox.Identity) error {
	tmp, err := os.MkdirTemp(homes, ".new-"+filepath.Base(home)+"-") // mode 0700
	if err != nil {
		return err
	}
	if err := os.Chown(tmp, id.UID, id.GID); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, home, unix.RENAME_NOREPLACE)
	if err != nil {
		_ = os.Remove(tmp)
		if errors.Is(err, unix.EEXIST) {
			return nil // another call made it
		}
	}
	return err
}

// searchable makes dir exist with mode 0711: every user may search it, no one but its owner list
// or change it (the state directory's files stay 0600 and are masked in every sandbox).
func searchable(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st.Mode().Perm() != 0o711 {
		return os.Chmod(dir, 0o711)
	}
	return nil
}

// reachableState lets the uids a root host's bundle processes run as reach the state directory's
// bin/ (installed CLIs) and homes/: the state directory becomes searchable (0711), never readable;
// its files (state.db, token, secrets.key, the audit logs) are 0600 and masked in every sandbox.
func (h *Host) reachableState() error {
	if h.opts.Sandbox.StateDir == "" {
		return nil
	}
	return searchable(h.opts.Sandbox.StateDir)
}

// safeDirectory adds ws, and only ws, as git's safe.directory to env when the process runs as a
// uid other than the owner of the workspace or of the .git in it (git refuses a repository whose
// work tree or git directory it does not own: "dubious ownership"; under the unit the daemon's
// user owns the workspace and a member of its group the repository made there), through
// GIT_CONFIG_COUNT/KEY/VALUE (git's command scope, which safe.directory honours), after the
// entries env holds already. A host that is not root runs the process as itself mapped to root of
// a user namespace: its own files are the process's there.
func safeDirectory(env []string, ws string, uid int) []string {
	if !ownedBy(ws, uid, os.Stat) || !ownedBy(filepath.Join(ws, ".git"), uid, os.Lstat) {
		return addSafeDirectory(env, ws)
	}
	return env
}

// ownedBy reports whether the file at p, as stat finds it, belongs to uid; a missing file does.
func ownedBy(p string, uid int, stat func(string) (os.FileInfo, error)) bool {
	st, err := stat(p)
	if err != nil {
		return true
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return !ok || int(sys.Uid) == uid
}

// addSafeDirectory appends ws as one more safe.directory entry of git's command scope.
func addSafeDirectory(env []string, ws string) []string {
	n := 0
	if v, ok := lookupVar(env, "GIT_CONFIG_COUNT"); ok {
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 {
			return env // git refuses such a count itself; it is not ours to repair
		}
		n = c
	}
	env = setEnv(env, "GIT_CONFIG_KEY_"+strconv.Itoa(n), "safe.directory")
	env = setEnv(env, "GIT_CONFIG_VALUE_"+strconv.Itoa(n), ws)
	return setEnv(env, "GIT_CONFIG_COUNT", strconv.Itoa(n+1))
}

// lookupVar finds name in env (KEY=VALUE).
func lookupVar(env []string, name string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkDir is where a version check runs as id when the workspace is not usable: id's home when id
// may use it, else a new temporary folder id owns, removed by done.
func (h *Host) checkDir(id sandbox.Identity) (dir string, done func(), err error) {
	who := access.Who{UID: id.UID, GID: id.GID, Groups: id.Groups}
	if home, err := h.homeFor(id); err == nil && access.CheckDir(home, who) == nil {
		return home, func() {}, nil
	}
	dir, err = os.MkdirTemp("", checkDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", nil, err
	}
	done = func() { _ = os.RemoveAll(dir) }
	if err := os.Chown(dir, id.UID, id.GID); err != nil {
		done()
		return "", nil, err
	}
	return dir, done, nil
}
