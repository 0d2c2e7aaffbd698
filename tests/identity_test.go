package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// The identity model of docs/operations.md ("Identity: who runs, HOME, which workspace"), tested
// the way it is deployed: a root clihostd, callers that are other users on its control socket.

// Test users and groups (created once per machine; each name is one role).
const (
	sockGroup   = "clihost-t-sock"    // the control socket's --group
	shareGroup  = "clihost-t-share"   // a group granted a workspace
	ownerName   = "clihost-t-owner"   // owns a private workspace
	memberName  = "clihost-t-member"  // in sockGroup: may use the socket
	outsideName = "clihost-t-outside" // in no group: may not use the socket
	agentName   = "clihost-t-agent"   // the daemon's --agent-user
)

// identityBundles writes two coreutils bundles: id (tool who prints uid, gid and groups) and env
// (tool show prints the environment), and returns their folder.
func identityBundles(t *testing.T) string {
	t.Helper()
	files := map[string]string{
		"id/CLI.md":  fixture.CLI("id", "id", "  who: ./tools/who/TOOL.md\n"),
		"env/CLI.md": fixture.CLI("env", "env", "  show: ./tools/show/TOOL.md\n"),
	}
	for _, tool := range []string{"id/tools/who", "env/tools/show"} {
		files[tool+"/TOOL.md"] = `---
name: Show
id: ` + strings.ReplaceAll(strings.TrimSuffix(tool, "/TOOL.md"), "/tools/", ".") + `
description: Prints who runs.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [] }
---
`
	}
	dir := fixture.Write(t, files)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rootDaemon starts a root clihostd serving the identity bundles and the catalog, with its socket
// in a folder every user can reach and admitting sockGroup, and extra flags.
func rootDaemon(t *testing.T, extra ...string) *daemonProc {
	t.Helper()
	fixture.NeedRoot(t)
	fixture.Group(t, sockGroup)
	// The built binaries and the socket's folder must be reachable by the callers.
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "clihost-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	if err := os.Chmod(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "ctl.sock")
	args := append([]string{"--socket", sock, "--group", sockGroup, "--bundles", identityBundles(t), "--bundles", "../bundles"}, extra...)
	d := startDaemon(t, t.TempDir(), args...)
	d.socket = sock
	return d
}

// ctlAs runs clihostctl against d as u (uid, gid and supplementary groups), from /.
func (d *daemonProc) ctlAs(t *testing.T, u fixture.TestUser, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin.ctl, append([]string{"--socket", d.socket}, args...)...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + systemPath, "HOME=" + u.Home, "CLIHOST_BUNDLES="}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groupsOf(u)}}
	o, err := fixture.Run(cmd)
	if err != nil {
		t.Fatalf("clihostctl as %s: %v", u.Name, err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}

// rawAs posts body (GET when empty) to the control API's path as u, with curl (what clihostctl checks on its side
// does not protect the daemon).
func (d *daemonProc) rawAs(t *testing.T, u fixture.TestUser, path, body string) result {
	t.Helper()
	args := []string{"-sS", "--unix-socket", d.socket}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", body)
	}
	cmd := exec.Command("curl", append(args, "http://clihostd"+path)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groupsOf(u)}}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("curl as %s: %v: %s", u.Name, err, errb.String())
	}
	return result{0, out.String(), errb.String()}
}

// startGroupDaemon starts clihostd as a multi-user host runs it: as agent (HOME its home), its
// control socket sock open to sockGroup, in the state directory and workspace given, with pathPrefix
// (may be "") before the system PATH and the extra flags.
func startGroupDaemon(t *testing.T, agent fixture.TestUser, state, ws, sock, pathPrefix string, extra ...string) *daemonProc {
	t.Helper()
	args := append([]string{"--state", state, "--socket", sock, "--http", "127.0.0.1:0", "--workspace", ws, "--group", sockGroup}, extra...)
	cmd := exec.Command(bin.daemon, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + pathPrefix + systemPath, "HOME=" + agent.Home, "CLIHOST_BUNDLES="}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(agent.UID), Gid: uint32(agent.GID), Groups: groupsOf(agent)}}
	d := &daemonProc{cmd: cmd, socket: sock, state: state, ws: ws}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.proc = fixture.Start(t, cmd)
	d.log = fixture.Follow(stderr)
	d.waitFor(t, "clihostd ready")
	return d
}

func groupsOf(u fixture.TestUser) []uint32 {
	groups := make([]uint32, 0, len(u.Groups))
	for _, g := range u.Groups {
		groups = append(groups, uint32(g))
	}
	return groups
}

// identityEnvelope is a call's result as clihostctl call prints it.
type identityEnvelope struct {
	OK    bool
	Value any
	Error *struct{ Code, Message, Hint, Stderr string }
}

func parseEnvelope(t *testing.T, r result) identityEnvelope {
	t.Helper()
	var env identityEnvelope
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil {
		t.Fatalf("not an envelope: exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return env
}

// ids parses id's output into the uid, gid and the supplementary groups.
func ids(t *testing.T, out string) (uid, gid int, groups []int) {
	t.Helper()
	m := regexp.MustCompile(`uid=(\d+)\S* gid=(\d+)\S*(?: groups=(\S+))?`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("id printed %q", out)
	}
	uid, _ = strconv.Atoi(m[1])
	gid, _ = strconv.Atoi(m[2])
	for _, g := range regexp.MustCompile(`(\d+)(?:\([^)]*\))?`).FindAllStringSubmatch(m[3], -1) {
		n, _ := strconv.Atoi(g[1])
		groups = append(groups, n)
	}
	return uid, gid, groups
}

// privateDir makes dir owned by uid:gid with mode, holding data.json.
func privateDir(t *testing.T, dir string, uid, gid int, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(`{"secret": "s3cr3t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "data.json")} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// TestControlCallerNamesOnlyItsOwnWorkspace: a member of the socket's group names another user's
// home as the workspace; the call must be refused (it used to run as that home's owner and read
// its files). Its own workspace runs as itself, with its supplementary groups and its home; a
// workspace it reaches through a group works; a symlink to the other home is refused too; every
// command that takes a workspace is refused the same way; an outsider is not admitted at all.
func TestControlCallerNamesOnlyItsOwnWorkspace(t *testing.T) {
	fixture.Need(t, "jq", "curl")
	d := rootDaemon(t)
	owner := fixture.User(t, ownerName)
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	outsider := fixture.User(t, outsideName)
	victim := filepath.Join(owner.Home, "private")
	privateDir(t, victim, owner.UID, owner.GID, 0o700)

	// The attack: the owner's home, named by the member with clihostctl, and a folder in it
	// (which clihostctl cannot stat as the member) in a request of its own.
	denied := func(r result, ws string) {
		t.Helper()
		env := parseEnvelope(t, r)
		if env.OK || env.Error == nil || env.Error.Code != "workspace_denied" || strings.Contains(r.stdout, "s3cr3t") ||
			!strings.Contains(env.Error.Message, ws) || !strings.Contains(env.Error.Message, memberName) || !strings.Contains(env.Error.Hint, "setfacl") {
			t.Fatalf("member naming %s: %+v\n%s", ws, env.Error, r.stdout)
		}
	}
	denied(d.ctlAs(t, member, "call", "jq", "filter", "--workspace", owner.Home, "--input", `{"filter": ".secret", "files": ["private/data.json"]}`), owner.Home)
	denied(d.rawAs(t, member, "/v1/call", `{"bundle": "jq", "tool": "filter", "workspace": "`+victim+`", "input": {"filter": ".secret", "files": ["data.json"]}}`), victim)
	// Through a symlink the member owns.
	link := filepath.Join(member.Home, "link-to-owner")
	_ = os.Remove(link)
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	denied(d.rawAs(t, member, "/v1/call", `{"bundle": "id", "tool": "who", "workspace": "`+link+`"}`), link)
	// Every other request that names a workspace.
	for _, req := range [][2]string{
		{"/v1/setup", `{"bundle": "id", "workspace": "` + victim + `"}`},
		{"/v1/setup?bundle=id&workspace=" + victim, ""},
		{"/v1/login?bundle=gh&workspace=" + victim, ""},
		{"/v1/login", `{"bundle": "gh", "workspace": "` + victim + `", "wait_seconds": 1}`},
		{"/v1/logout", `{"bundle": "gh", "workspace": "` + victim + `"}`},
	} {
		r := d.rawAs(t, member, req[0], req[1])
		if !strings.Contains(r.stdout, "workspace_denied") || !strings.Contains(r.stdout, memberName+" (uid ") {
			t.Errorf("member: %s %s:\n%s", req[0], req[1], r.stdout)
		}
	}

	// Positive control: the member's own workspace runs as the member, with its groups and home.
	own := filepath.Join(member.Home, "project")
	privateDir(t, own, member.UID, member.GID, 0o700)
	env := parseEnvelope(t, d.ctlAs(t, member, "call", "id", "who", "--workspace", own))
	if !env.OK {
		t.Fatalf("member in its own workspace: %+v", env.Error)
	}
	uid, gid, groups := ids(t, env.Value.(string))
	if uid != member.UID || gid != member.GID || !slices.Contains(groups, member.Groups[0]) || !slices.Contains(groups, member.Groups[1]) {
		t.Fatalf("ran as uid %d gid %d groups %v, want %d %d with %v", uid, gid, groups, member.UID, member.GID, member.Groups)
	}
	env = parseEnvelope(t, d.ctlAs(t, member, "call", "env", "show", "--workspace", own))
	if !env.OK || !strings.Contains(env.Value.(string), "HOME="+member.Home+"\n") {
		t.Fatalf("member's HOME: %+v %v", env.Error, env.Value)
	}
	// A workspace shared with the member's group (root's, mode 2770) works too.
	shared := filepath.Join(t.TempDir(), "shared")
	for _, dir := range []string{filepath.Dir(filepath.Dir(shared)), filepath.Dir(shared)} {
		if err := os.Chmod(dir, 0o755); err != nil { // t.TempDir's folders are 0700
			t.Fatal(err)
		}
	}
	privateDir(t, shared, 0, member.Groups[1], 0o770)
	if env := parseEnvelope(t, d.ctlAs(t, member, "call", "id", "who", "--workspace", shared)); !env.OK {
		t.Fatalf("member in a group-shared workspace: %+v", env.Error)
	}

	// An outsider is not admitted: the socket (0660, group sockGroup) refuses the connection.
	if r := d.ctlAs(t, outsider, "call", "id", "who", "--workspace", outsider.Home); r.code == 0 || !strings.Contains(r.stderr, "connect: permission denied") {
		t.Fatalf("outsider: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRootHostPrivateWorkspace: a root daemon whose workspace is root's own private folder (as
// /root/project is). Without an agent user no one but root may use it: every call is refused,
// before anything runs, with workspace_denied naming the workspace, the uid and the fix (it used
// to fail as "exec /usr/bin/jq: permission denied"); status still finds jq installed.
func TestRootHostPrivateWorkspace(t *testing.T) {
	fixture.Need(t, "jq")
	fixture.NeedRoot(t)
	ws := filepath.Join(t.TempDir(), "project") // the parent is root's, 0700, as /root is
	privateDir(t, ws, 0, 0, 0o700)
	d := rootDaemon(t, "--workspace", ws)
	r := d.ctl(t, "call", "jq", "filter", "--workspace", ws, "--input", `{"filter": ".secret", "files": ["data.json"]}`)
	env := parseEnvelope(t, r)
	if env.OK || env.Error == nil || env.Error.Code != "workspace_denied" || !strings.Contains(env.Error.Message, ws) ||
		!strings.Contains(env.Error.Message, "65534") || !strings.Contains(env.Error.Hint, "--agent-user") || !strings.Contains(env.Error.Hint, "setfacl -m u:") {
		t.Fatalf("root's private workspace: %+v\n%s", env.Error, r.stdout)
	}
	// The daemon's own version check (status, install) runs in nobody's kept home instead: the CLI
	// is found installed on such a host.
	if st := d.status(t, "jq"); st.Install != "installed" || st.Version == "" {
		t.Fatalf("status on a root host with a private workspace: %+v", st)
	}
	if st, err := os.Stat(filepath.Join(d.state, "homes", "65534")); err != nil || st.Mode().Perm() != 0o700 || st.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatalf("nobody's kept home: %v %v", st, err)
	}
	// The state directory is searchable (bin/, homes/), never listable; its files stay private.
	want := map[string]os.FileMode{"": 0o711, "state.db": 0o600, "token": 0o600, "secrets.key": 0o600, "audit.jsonl": 0o600}
	for name, mode := range want {
		if st, err := os.Stat(filepath.Join(d.state, name)); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s/%s: %v %v, want %v", d.state, name, st.Mode(), err, mode)
		}
	}
}

// TestRootHostAgentUserGranted: the fix the refusal names: clihostd --agent-user NAME, and NAME
// granted the workspace with an ACL. jq reads the workspace, git works in root's repository
// (safe.directory for it alone, no "dubious ownership"), and the agent gets a home it owns.
func TestRootHostAgentUserGranted(t *testing.T) {
	fixture.Need(t, "jq", "git", "setfacl")
	fixture.NeedRoot(t)
	agent := fixture.User(t, agentName)
	parent := t.TempDir()
	ws := filepath.Join(parent, "project")
	privateDir(t, ws, 0, 0, 0o700)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=" + systemPath, "HOME=" + parent, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "data.json")
	git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
	for _, acl := range [][]string{{"-m", "u:" + agentName + ":x", filepath.Dir(parent), parent}, {"-R", "-m", "u:" + agentName + ":rwX", ws}} {
		if out, err := exec.Command("setfacl", acl...).CombinedOutput(); err != nil {
			t.Fatalf("setfacl %v: %v: %s", acl, err, out)
		}
	}
	d := rootDaemon(t, "--workspace", ws, "--agent-user", agentName)

	env := parseEnvelope(t, d.ctl(t, "call", "jq", "filter", "--workspace", ws, "--input", `{"filter": ".secret", "files": ["data.json"], "raw_output": true}`))
	if !env.OK || strings.TrimSpace(env.Value.(string)) != "s3cr3t" {
		t.Fatalf("jq as the granted agent: %+v %v", env.Error, env.Value)
	}
	r := d.ctl(t, "call", "git", "status", "--workspace", ws)
	env = parseEnvelope(t, r)
	if !env.OK || !strings.Contains(env.Value.(string), "## main") {
		t.Fatalf("git status as the granted agent: %+v %v", env.Error, env.Value)
	}
	env = parseEnvelope(t, d.ctl(t, "call", "id", "who", "--workspace", ws))
	if uid, _, _ := ids(t, env.Value.(string)); !env.OK || uid != agent.UID {
		t.Fatalf("root's call ran as %v, want the agent %d", env.Value, agent.UID)
	}
	env = parseEnvelope(t, d.ctl(t, "call", "env", "show", "--workspace", ws))
	if !env.OK || !strings.Contains(env.Value.(string), "HOME="+agent.Home+"\n") {
		t.Fatalf("the agent's HOME: %+v %v", env.Error, env.Value)
	}
}

// TestUnprivilegedDaemonChecksTheCallersWorkspace: the shipped unit's deployment, a daemon that is
// not root (here the agent user) with a socket group. It cannot take the caller's identity, so it
// decides from mode bits: a member naming the owner's private folder is refused, and so is a folder
// whose ACL it cannot evaluate; the member's own shared folder passes the check.
func TestUnprivilegedDaemonChecksTheCallersWorkspace(t *testing.T) {
	fixture.Need(t, "curl", "setfacl")
	fixture.NeedRoot(t)
	fixture.Group(t, sockGroup)
	agent := fixture.User(t, agentName, sockGroup)
	owner := fixture.User(t, ownerName)
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	victim := filepath.Join(owner.Home, "private")
	privateDir(t, victim, owner.UID, owner.GID, 0o700)
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	fixture.Reachable(t, base)
	state, ws, sock := filepath.Join(base, "state"), filepath.Join(base, "ws"), filepath.Join(base, "run", "ctl.sock")
	for _, dir := range []string{state, ws, filepath.Dir(sock)} {
		privateDir(t, dir, agent.UID, agent.GID, 0o755)
	}
	shared := filepath.Join(base, "shared") // the member's group may use it
	privateDir(t, shared, owner.UID, member.Groups[1], 0o770)
	acl := filepath.Join(base, "acl") // granted to the member by an ACL the daemon does not read
	privateDir(t, acl, owner.UID, owner.GID, 0o700)
	if out, err := exec.Command("setfacl", "-m", "u:"+memberName+":rwx", acl).CombinedOutput(); err != nil {
		t.Fatalf("setfacl: %v: %s", err, out)
	}

	d := startGroupDaemon(t, agent, state, ws, sock, "", "--bundles", identityBundles(t))

	for _, dir := range []string{owner.Home, victim, acl} {
		r := d.rawAs(t, member, "/v1/call", `{"bundle": "id", "tool": "who", "workspace": "`+dir+`"}`)
		env := parseEnvelope(t, r)
		if env.Error == nil || env.Error.Code != "workspace_denied" || !strings.Contains(env.Error.Message, memberName) {
			t.Errorf("member naming %s on an unprivileged daemon: %s", dir, r.stdout)
		}
	}
	// The shared folder passes the check (whatever the call then meets on this host).
	r := d.rawAs(t, member, "/v1/call", `{"bundle": "id", "tool": "who", "workspace": "`+shared+`"}`)
	if env := parseEnvelope(t, r); env.Error != nil && env.Error.Code == "workspace_denied" {
		t.Errorf("member naming its group's folder: %s", r.stdout)
	}
}
