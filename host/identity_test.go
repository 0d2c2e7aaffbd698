package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox"
)

// TestRunAs: whom a root host runs a process as, for each kind of caller (docs/operations.md,
// "Identity: who runs, HOME, which workspace").
func TestRunAs(t *testing.T) {
	fixture.NeedRoot(t)
	member := fixture.User(t, "clihost-t-member", "clihost-t-share")
	agent := fixture.User(t, "clihost-t-agent", "clihost-t-share")
	owned := fixture.Workspace(t) // nobody's
	rootOwned := t.TempDir()
	userOwned := t.TempDir()
	if err := os.Chown(userOwned, member.UID, 4242); err != nil {
		t.Fatal(err)
	}
	plain := &Host{opts: Options{}}
	withAgent := &Host{opts: Options{Sandbox: SandboxOptions{AgentUID: agent.UID, AgentGID: agent.GID}}}
	for _, c := range []struct {
		name   string
		h      *Host
		ws     string
		caller *CallerID
		want   sandbox.Identity
	}{
		{"non-root caller", withAgent, rootOwned, &CallerID{UID: member.UID, GID: member.GID, Groups: []int{0, 77}}, sandbox.Identity{UID: member.UID, GID: member.GID, Groups: []int{77}}},
		{"root caller, agent user", withAgent, userOwned, &CallerID{}, sandbox.Identity{UID: agent.UID, GID: agent.GID, Groups: agent.Groups}},
		{"MCP agent, agent user", withAgent, userOwned, nil, sandbox.Identity{UID: agent.UID, GID: agent.GID, Groups: agent.Groups}},
		{"workspace owner (passwd gid and groups)", plain, userOwned, nil, sandbox.Identity{UID: member.UID, GID: member.GID, Groups: member.Groups}},
		{"root's workspace: nobody", plain, rootOwned, &CallerID{}, sandbox.Identity{UID: nobodyID, GID: nobodyID}},
		{"nobody's workspace", plain, owned, nil, sandbox.Identity{UID: nobodyID, GID: nobodyID}},
	} {
		got := c.h.runAs(c.ws, c.caller)
		// The test users persist across tests and may be in more groups than this one made.
		missing := slices.ContainsFunc(c.want.Groups, func(g int) bool { return !slices.Contains(got.Groups, g) })
		if got.UID != c.want.UID || got.GID != c.want.GID || missing || slices.Contains(got.Groups, 0) || len(c.want.Groups) == 0 && len(got.Groups) > 0 {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestHomeFor: the uid's own home when it is usable; else one the host keeps under its state
// directory (0700, the uid's), the state directory then searchable but not readable, when the uid
// can reach it, else none; a passwd home that is the state directory is not used.
func TestHomeFor(t *testing.T) {
	fixture.NeedRoot(t)
	member := fixture.User(t, "clihost-t-member")
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	h := &Host{opts: Options{Sandbox: SandboxOptions{StateDir: state}}}
	if home, err := h.homeFor(sandbox.Identity{UID: member.UID, GID: member.GID}); err != nil || home != member.Home {
		t.Fatalf("member: %q %v, want %s", home, err, member.Home)
	}
	// A state directory nobody cannot reach (t.TempDir's folder is 0700, as /root is): no home.
	if home, err := h.homeFor(sandbox.Identity{UID: nobodyID, GID: nobodyID}); err != nil || home != "/nonexistent" {
		t.Fatalf("nobody, state unreachable: %q %v", home, err)
	}
	fixture.Reachable(t, filepath.Dir(state))
	home, err := h.homeFor(sandbox.Identity{UID: nobodyID, GID: nobodyID}) // passwd: /nonexistent
	want := filepath.Join(state, "homes", strconv.Itoa(nobodyID))
	if err != nil || home != want {
		t.Fatalf("nobody: %q %v, want %s", home, err, want)
	}
	for p, mode := range map[string]os.FileMode{state: 0o711, filepath.Dir(want): 0o711, want: 0o700} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want %v", p, st.Mode(), err, mode)
		}
	}
	if st, _ := os.Stat(want); int(st.Sys().(*syscall.Stat_t).Uid) != nobodyID {
		t.Errorf("%s is not nobody's", want)
	}
	// A home that is the state directory (the unit's clihost user, /var/lib/clihost) is not used.
	inState := &Host{opts: Options{Sandbox: SandboxOptions{StateDir: member.Home}}}
	t.Cleanup(func() {
		os.RemoveAll(filepath.Join(member.Home, "homes"))
		os.Chmod(member.Home, 0o700)
	})
	kept := filepath.Join(member.Home, "homes", strconv.Itoa(member.UID))
	if home, err := inState.homeFor(sandbox.Identity{UID: member.UID, GID: member.GID}); err != nil || home != kept {
		t.Fatalf("a home that is the state directory: %q %v, want %s", home, err, kept)
	}
}

// TestIdentityForKeptHome: identityFor asks the kernel about the workspace and a kept home in one
// check and gives the same home as homeFor: none while the uid cannot reach the state directory,
// the kept one once it can; a workspace the uid may not use is refused either way.
func TestIdentityForKeptHome(t *testing.T) {
	fixture.NeedRoot(t)
	state := filepath.Join(t.TempDir(), "state")
	ws := filepath.Join(t.TempDir(), "ws")
	for _, d := range []string{state, ws} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(state), 0o700); err != nil { // as /root is
		t.Fatal(err)
	}
	if err := os.Chown(ws, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, filepath.Dir(ws))
	h := &Host{opts: Options{Sandbox: SandboxOptions{StateDir: state}}}
	who, e := h.identityFor(ws, nil, "")
	if e != nil || who.id.UID != nobodyID || who.home != noHome {
		t.Fatalf("state unreachable: %+v %+v, want nobody with %s", who, e, noHome)
	}
	fixture.Reachable(t, filepath.Dir(state))
	want := filepath.Join(state, "homes", strconv.Itoa(nobodyID))
	if who, e = h.identityFor(ws, nil, "/usr/bin/true"); e != nil || who.home != want {
		t.Fatalf("state reachable: %+v %+v, want home %s", who, e, want)
	}
	if err := os.Chmod(ws, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, e = h.identityFor(ws, nil, "/usr/bin/true"); e == nil || e.Code != errcode.WorkspaceDenied {
		t.Fatalf("a workspace nobody may not write: %+v, want workspace_denied", e)
	}
}

// TestRefusedCallMakesNoHome: a call whose workspace the uid may not use is refused before the
// host makes anything for that uid: no <state>/homes/<uid> appears for a workspace that is a file
// (whose owner the call would run as), one its owner may not write, or another uid's folder named
// by a caller; an accepted call then makes the home as before.
func TestRefusedCallMakesNoHome(t *testing.T) {
	fixture.NeedRoot(t)
	member := fixture.User(t, "clihost-t-member", "clihost-t-share")
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	fixture.Reachable(t, filepath.Dir(state))
	h := &Host{opts: Options{Sandbox: SandboxOptions{StateDir: state}}}
	dir := t.TempDir()
	fixture.Reachable(t, dir)
	file, closed := filepath.Join(dir, "file"), filepath.Join(dir, "closed")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(closed, 0o500); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, closed} {
		if err := os.Chown(p, nobodyID, nobodyID); err != nil {
			t.Fatal(err)
		}
	}
	nobodyHome := filepath.Join(state, "homes", strconv.Itoa(nobodyID))
	memberHome := filepath.Join(state, "homes", strconv.Itoa(member.UID))
	for _, c := range []struct {
		ws     string
		caller *CallerID
		home   string
	}{
		{file, nil, nobodyHome},
		{closed, nil, nobodyHome},
		{closed, &CallerID{UID: member.UID, GID: member.GID}, memberHome},
	} {
		if _, e := h.identityFor(c.ws, c.caller, "/usr/bin/true"); e == nil {
			t.Fatalf("%s: accepted, want refused", c.ws)
		}
		if _, err := os.Lstat(c.home); !os.IsNotExist(err) {
			t.Fatalf("%s refused, yet %s was made (%v)", c.ws, c.home, err)
		}
	}
	ws := fixture.Workspace(t) // nobody's
	if who, e := h.identityFor(ws, nil, "/usr/bin/true"); e != nil || who.home != nobodyHome {
		t.Fatalf("an accepted call: %+v %+v, want home %s", who, e, nobodyHome)
	}
}

// TestSafeDirectory: the workspace is git's safe.directory only for a uid that does not own it, as
// one more GIT_CONFIG entry after those env holds.
func TestSafeDirectory(t *testing.T) {
	ws := t.TempDir()
	owner := os.Geteuid()
	if env := safeDirectory([]string{"A=1"}, ws, owner); !slices.Equal(env, []string{"A=1"}) {
		t.Errorf("the owner: %v", env)
	}
	got := safeDirectory([]string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.pager", "GIT_CONFIG_VALUE_0=cat"}, ws, owner+1)
	want := []string{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=core.pager", "GIT_CONFIG_VALUE_0=cat",
		"GIT_CONFIG_KEY_1=safe.directory", "GIT_CONFIG_VALUE_1=" + ws}
	if !slices.Equal(got, want) {
		t.Errorf("appended: %v, want %v", got, want)
	}
	if env := safeDirectory([]string{"GIT_CONFIG_COUNT=x"}, ws, owner+1); !slices.Equal(env, []string{"GIT_CONFIG_COUNT=x"}) {
		t.Errorf("an invalid count was rewritten: %v", env)
	}
	// The unit's workspace: the uid owns it, a member of the group owns the repository made there.
	fixture.NeedRoot(t)
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if env := safeDirectory(nil, ws, owner); !slices.Equal(env, nil) {
		t.Errorf("the owner of the workspace and its .git: %v", env)
	}
	if err := os.Lchown(filepath.Join(ws, ".git"), owner+1, -1); err != nil {
		t.Fatal(err)
	}
	want = []string{"GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=" + ws, "GIT_CONFIG_COUNT=1"}
	if got := safeDirectory(nil, ws, owner); !slices.Equal(got, want) {
		t.Errorf("a .git another uid owns: %v, want %v", got, want)
	}
}

// TestCheckDir: a version check that may not use the workspace runs in the uid's home, or, when
// that is unusable too (a state directory under /root), in a temporary folder the uid owns,
// removed afterwards.
func TestCheckDir(t *testing.T) {
	fixture.NeedRoot(t)
	state := filepath.Join(t.TempDir(), "state") // its folder is 0700: nobody cannot reach it
	h := &Host{opts: Options{Sandbox: SandboxOptions{StateDir: state}}}
	nobody := sandbox.Identity{UID: nobodyID, GID: nobodyID}
	dir, done, err := h.checkDir(nobody)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || int(st.Sys().(*syscall.Stat_t).Uid) != nobodyID || filepath.Dir(dir) != filepath.Clean(os.TempDir()) {
		t.Fatalf("check folder %s: %v %v", dir, st, err)
	}
	done()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s was not removed: %v", dir, err)
	}
	fixture.Reachable(t, filepath.Dir(state))
	if dir, _, err := h.checkDir(nobody); err != nil || dir != filepath.Join(state, "homes", strconv.Itoa(nobodyID)) {
		t.Fatalf("with a reachable state directory: %q %v", dir, err)
	}
}

// TestWithHome: the process's HOME is its identity's home; a HOME env.pass copied from the host
// (root's, on a root host) is replaced; one the manifest set to its own value is kept.
func TestWithHome(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "HOME" {
			return "/root", true
		}
		return "", false
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "HOME=/home/alice"},
		{[]string{"PATH=/usr/bin", "HOME=/root"}, "HOME=/home/alice"},
		{[]string{"HOME=/opt/tool-home"}, "HOME=/opt/tool-home"},
	} {
		got := withHome(slices.Clone(tc.env), "/home/alice", lookup)
		var homes []string
		for _, kv := range got {
			if strings.HasPrefix(kv, "HOME=") {
				homes = append(homes, kv)
			}
		}
		if len(homes) != 1 || homes[0] != tc.want {
			t.Errorf("withHome(%q) = %q, want exactly %q", tc.env, got, tc.want)
		}
	}
	// A developer's own daemon: its HOME is the process's home and stays.
	if got := withHome([]string{"HOME=/root"}, "/root", lookup); len(got) != 1 || got[0] != "HOME=/root" {
		t.Errorf("same home: %q", got)
	}
}

// TestBinaryUnderAPrivateHome: on a root host a CLI found under root's 0700 home (a pyenv shim) is
// refused before anything starts, with binary_denied naming the binary, the uid and the folder
// that uid cannot search — not a bare "exec: permission denied" blamed on the bundle's sandbox.
// The same binary on a path every user reaches runs (the positive control).
func TestBinaryUnderAPrivateHome(t *testing.T) {
	needSandbox(t)
	fixture.NeedRoot(t)
	base := t.TempDir()
	fixture.Reachable(t, base)
	home := filepath.Join(base, "root")
	shims, open := filepath.Join(home, ".pyenv", "shims"), filepath.Join(base, "bin")
	for _, d := range []string{shims, open} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile("/usr/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		if err := fixture.WriteFile(filepath.Join(d, "true"), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	reg := fixture.Registry(t, fixture.True())
	b, err := reg.Get("true")
	if err != nil {
		t.Fatal(err)
	}
	ws := fixture.Workspace(t)
	for _, tc := range []struct {
		dir  string
		code errcode.Code
	}{{shims, "binary_denied"}, {open, ""}} {
		h := New(reg, Options{LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return tc.dir, true
			}
			return "", false
		}})
		env := h.Call(context.Background(), b, "run", map[string]any{}, Caller{Workspace: ws}, CallOptions{})
		switch {
		case tc.code == "" && !env.OK:
			t.Errorf("true in %s: %+v, want it to run", tc.dir, env.Error)
		case tc.code == "":
		case env.OK || env.Error.Code != tc.code || env.Error.Category != "permission" ||
			!strings.Contains(env.Error.Message, filepath.Join(shims, "true")) || !strings.Contains(env.Error.Message, home+" may not be searched") ||
			!strings.Contains(env.Error.Message, "uid 65534") || !strings.Contains(env.Error.Hint, "--agent-user"):
			t.Errorf("true in %s: %+v, want %s naming the binary, uid 65534 and %s", tc.dir, env.Error, tc.code, home)
		}
	}
}

// TestWorkspaceChangedAfterCheck: a control-socket caller's workspace reaches the host resolved
// (clihostd resolved and checked it); a path that no longer resolves to itself when the sandbox is
// compiled was changed after the check (a symbolic link swapped in by the caller, pointing at a
// folder the caller was never checked for) and is refused; the same call with the resolved path
// runs (positive control). Before the fix the sandbox followed the link and the call ran there.
func TestWorkspaceChangedAfterCheck(t *testing.T) {
	fixture.Need(t, "true")
	h, _ := writeBundle(t, fixture.True(), Options{})
	ws := fixture.Workspace(t)
	link := filepath.Join(filepath.Dir(ws), "swapped")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	peer := &CallerID{UID: os.Geteuid(), GID: os.Getegid()}
	if os.Geteuid() == 0 {
		peer = &CallerID{UID: fixture.AgentID, GID: fixture.AgentID}
	}
	b := bundle(t, h, "true")
	if env := h.Call(context.Background(), b, "run", map[string]any{}, Caller{Workspace: ws, Peer: peer}, CallOptions{}); !env.OK {
		t.Fatalf("positive control, the resolved workspace: %+v", env.Error)
	}
	env := h.Call(context.Background(), b, "run", map[string]any{}, Caller{Workspace: link, Peer: peer}, CallOptions{})
	if env.OK || env.Error == nil || env.Error.Code != "workspace_denied" || !strings.Contains(env.Error.Message, "changed after its access check") {
		t.Fatalf("a workspace path that resolves elsewhere than checked: want workspace_denied (changed), got %+v", env)
	}
}

// TestWritableRootsTheUIDCannotWrite: on a root host, a call's writable roots are resolved as root
// (~ and symbolic links followed): a link in the home of the uid a call runs as can lead one into
// another user's folder, where the host (root) acts after the call (it sweeps absent deny paths,
// the git rule moves files). Such a call is refused (path_denied) naming the folder and the uid;
// the same link to a folder the uid owns is fine (positive control). Before the fix the call ran.
func TestWritableRootsTheUIDCannotWrite(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "true")
	state := filepath.Join(t.TempDir(), "state")
	fixture.Reachable(t, filepath.Dir(state))
	h, _ := writeBundle(t, fixture.True(), Options{Sandbox: SandboxOptions{StateDir: state}})
	b := bundle(t, h, "true")
	b.CLI.Sandbox.FS.Write = []string{"~/.cache/x/**"}
	ws := fixture.Workspace(t) // nobody's: the call runs as nobody, HOME <state>/homes/65534
	id := sandbox.Identity{UID: fixture.AgentID, GID: fixture.AgentID}
	home, err := h.keptHome(id, true)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(home, ".cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := t.TempDir() // root's
	fixture.Reachable(t, victim)
	own := fixture.Workspace(t)
	for _, target := range []string{own, victim} {
		os.Remove(filepath.Join(cache, "x"))
		if err := os.Symlink(target, filepath.Join(cache, "x")); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(cache, "x"), fixture.AgentID, fixture.AgentID); err != nil {
			t.Fatal(err)
		}
		env := h.Call(context.Background(), b, "run", map[string]any{}, Caller{Workspace: ws}, CallOptions{})
		if target == own {
			if !env.OK {
				t.Fatalf("positive control, ~/.cache/x → a folder the uid owns: %+v", env.Error)
			}
			continue
		}
		if env.OK || env.Error == nil || env.Error.Code != "path_denied" || !strings.Contains(env.Error.Message, victim) {
			t.Fatalf("~/.cache/x → root's folder: want path_denied naming %s, got %+v", victim, env)
		}
	}
}
