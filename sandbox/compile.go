// Package sandbox compiles a bundle's declared sandbox into the concrete, absolute policy of one
// call (Compile). The policy is data: the re-exec'd init enforces it with mount masks, Landlock
// and seccomp (research/sandbox.md §5, §6).
package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/clihost/clihost/manifest"
)

// Access is a set of filesystem rights a PathRule grants.
type Access uint8

// The rights. Write always comes with Read; Exec comes with Read (an interpreter reads the script
// it runs).
const (
	Read Access = 1 << iota
	Write
	Exec
)

// MarshalText names the rights, comma-separated ("read,write"), for `clihostctl inspect`.
func (a Access) MarshalText() ([]byte, error) {
	var names []string
	for _, r := range []struct {
		bit  Access
		name string
	}{{Read, "read"}, {Write, "write"}, {Exec, "exec"}} {
		if a&r.bit != 0 {
			names = append(names, r.name)
		}
	}
	return []byte(strings.Join(names, ",")), nil
}

// PathRule grants Access on one absolute, cleaned path whose symlinks (in the part that exists)
// are resolved, so that the grant cannot be redirected after compilation. Subtree means the path
// and everything beneath it (a `dir/**` pattern); without it the rule names the path itself (a
// literal pattern, or one match of a last-component wildcard); on a directory, Landlock has no
// right that stops at the directory itself besides READ_DIR, so the enforcing layer grants
// file rights on a non-Subtree directory only as listing. A rule may name a path that does
// not exist yet (e.g. ~/.config/gh before the first login); the enforcing layer skips it, since
// Landlock can only grant existing inodes.
type PathRule struct {
	Path    string `json:"path"`
	Access  Access `json:"access"`
	Subtree bool   `json:"subtree,omitempty"`
}

// Policy is the effective, concrete sandbox of one call. Every list is sorted and free of
// duplicates, so two compilations of the same inputs on the same filesystem are equal.
type Policy struct {
	// Rules are the Landlock grants besides Runtime: fs.read (Read) and fs.write (Read|Write),
	// relative patterns resolved against the workspace and ~ against the calling user's home,
	// last-component wildcards expanded, plus one Read|Exec rule per Exec entry. Rules that fall
	// inside a Deny path are dropped (deny wins); a Subtree rule that contains a Deny path is kept,
	// and the enforcing layer splits it around the denied node (research/sandbox.md §5.3).
	Rules []PathRule `json:"rules"`
	// Deny are absolute paths to mask: fs.deny expanded at compile time (completely, or Compile
	// fails), the
	// mandatory denies (credentials, shell startup files, daemon sockets, the git and editor files
	// of writable roots) and Input.ExtraDeny. A path is listed with its parent directories
	// resolved; when it is itself a symlink, its target is listed as well; a path inside another
	// listed path is left out (masking a directory masks what it holds). Paths that do not exist
	// are kept: the enforcing layer masks or refuses them (research/sandbox.md §5.5).
	Deny []string `json:"deny"`
	// Protect are the paths of Input.Protect that lie inside a writable root (resolved, existing,
	// outside every Deny path): the enforcing layer keeps them read-only and pins them in place.
	Protect []string `json:"protect,omitempty"`
	// Exec are the files that may be executed, symlinks resolved: the binary, its ELF interpreter
	// (PT_INTERP) or script interpreter (#!), recursively, and, when exec.allow is true, the
	// exec.spawn binaries found on Input.PATH with their interpreters. A `#!/usr/bin/env prog`
	// script also gets prog, looked up on Input.PATH.
	Exec []string `json:"exec"`
	// Runtime is the read-only baseline every CLI needs to start (see runtimeCandidates), with the
	// binary's npm package tree when it has one (see packageTree).
	Runtime []PathRule `json:"runtime"`
	// Writable are the roots the mount layer binds read-write (fs.write's subtree roots and
	// literal files); everything else is read-only.
	Writable []string `json:"writable"`
	// Absent are the Deny paths inside a writable root that did not exist at compile time. The
	// kernel cannot mask them (a mask needs a mount point, which would have to be created on the
	// host), so the program may create them; Sweep removes what it created once it has exited.
	Absent []string `json:"absent,omitempty"`
	// present are the identities of the Deny paths inside a writable root that existed at compile
	// time (see Sweep).
	present map[string]fileID
	// roots are the identities of the writable roots at compile time: Sweep works in a root only
	// when its path still leads, without symbolic links, to the same directory.
	roots map[string]fileID
	// git is the state of the writable roots' git control files before the call (SnapshotGit).
	git *gitSnapshot
	// gitGlobal are git's per-user files (~/.gitconfig, $XDG_CONFIG_HOME/git/config and
	// attributes): judged like a repository's when they lie in a writable root.
	gitGlobal []string
	// Egress are the allowed outbound hosts, lowercase without a trailing dot; "*.example.com"
	// globs are kept as such. Empty means no network at all.
	Egress []string `json:"egress,omitempty"`
	// Ingress are the inbound URLs the host must expose, as declared.
	Ingress []string `json:"ingress,omitempty"`
	// Env is the child's whole environment, KEY=VALUE, built by Env from env.pass (read
	// through Input.LookupEnv) and env.set, without the variables Env refuses.
	Env []string `json:"env"`
	// TTY says whether the call needs a pseudo-terminal.
	TTY bool `json:"tty"`
	// Binary is the program to execute: Input.Binary with its symlinks resolved.
	Binary string `json:"binary"`
	// Notes explain what was dropped or narrowed and why: refused variables, spawn names not found
	// on PATH, wildcards that matched nothing, rules inside a denied path.
	Notes []string `json:"notes,omitempty"`
	// origin is what Explain needs to name the rule that refuses a path.
	origin origin
}

// Workspace is the workspace the policy was compiled for, as Compile resolved it (symbolic links
// followed); "" when the call has none. A caller that checked a workspace path before Compile
// compares it with this: a difference means the path was changed between the two.
func (p *Policy) Workspace() string { return p.origin.workspace }

// Input is what Compile needs to know about one call.
type Input struct {
	Bundle *manifest.Bundle
	// Tool is the tool being called, one of Bundle.Tools; nil for calls made on the bundle's own
	// behalf (version checks, setup and login commands), which use the bundle's sandbox.
	Tool *manifest.ToolEntry
	// Binary is the absolute path of the bundle's bin, as found on the host.
	Binary string
	// Workspace is the absolute directory relative patterns are resolved against. It may be empty
	// when no pattern is workspace-relative.
	Workspace string
	// Home is the calling user's home directory (never the daemon's), absolute; ~ means it.
	Home string
	// PATH is the search path for exec.spawn names and `#!/usr/bin/env` programs. Empty and
	// relative entries are never searched.
	PATH string
	// LookupEnv reads the caller's environment for env.pass, XDG_RUNTIME_DIR and SSH_AUTH_SOCK;
	// nil reads nothing.
	LookupEnv func(string) (string, bool)
	// DenyBudget is the most paths one deny glob may expand to; 0 means DefaultDenyBudget. Every
	// compile-time walk (deny globs, the search for nested git directories) also stops after
	// reading walkFactor times as many directory entries. A deny glob that cannot be fully
	// expanded fails the compilation.
	DenyBudget int
	// Protect are absolute files or directories the call must not change although they may lie
	// in a writable root: the host's bundle folders (manifests, vendored binaries), which it reads
	// back for later calls. Those inside a writable root are kept read-only (Policy.Protect).
	Protect []string
	// ExtraDeny are absolute paths the caller always masks, such as clihostd's own control socket
	// and state directory.
	ExtraDeny []string
}

// DefaultDenyBudget is the deny-glob expansion budget used when Input.DenyBudget is 0.
const DefaultDenyBudget = 10000

// walkFactor bounds a compile-time walk to walkFactor×budget directory entries, so that a huge
// tree cannot make compilation slow even when few entries match: with the default budget, the
// number of entries the git rule reads (DefaultGitGuardBudget), so that an ordinary large tree
// (node_modules) fits.
const walkFactor = DefaultGitGuardBudget / DefaultDenyBudget

// compiler holds the state of one Compile.
type compiler struct {
	in     Input
	budget int
	fs     *view  // this compilation's look at the filesystem
	ws     string // Workspace, resolved; "" when none was given
	home   string // Home, resolved

	access   map[PathRule]Access // keyed by Path and Subtree (Access zero): the merged rights
	writable map[string]bool
	declared []string // resolved static roots of the allow patterns (see exceptedCredential)
	exec     map[string]bool
	denies   map[string]bool
	why      map[string]string // denied path → the reason it is denied (why*), for Explain
	notes    map[string]bool
	gitDirs  map[string]bool // the git directories gitDirMasks masked, resolved
}

// Compile computes the effective sandbox of a call (the bundle's, narrowed by the tool's) and
// turns it into a concrete Policy against the current filesystem. It fails closed: a pattern it
// cannot enforce, a workspace pattern that resolves outside the workspace, a missing binary or
// interpreter, an absolute exec.spawn path that does not exist, an invalid egress host or a
// dangling symlink on a path it must pin is an error, never a silently wider policy.
func Compile(in Input) (*Policy, error) { return compileAsking(in, nil) }

// compileAsking is Compile, recording in asked (when not nil) the questions it asks.
func compileAsking(in Input, asked *journal) (*Policy, error) {
	c, err := newCompiler(in, asked)
	if err != nil {
		return nil, fmt.Errorf("compile sandbox: %w", err)
	}
	p, err := c.compile()
	if err != nil {
		return nil, fmt.Errorf("compile sandbox for %s: %w", c.subject(), err)
	}
	return p, nil
}

func newCompiler(in Input, asked *journal) (*compiler, error) {
	if in.Bundle == nil || in.Bundle.CLI == nil {
		return nil, errors.New("no bundle manifest")
	}
	if in.Tool != nil && (in.Tool.Tool == nil || !slices.Contains(in.Bundle.Tools, in.Tool)) {
		return nil, fmt.Errorf("tool %q is not a decoded tool of %s", in.Tool.CommandPath(), in.Bundle.Key())
	}
	if in.DenyBudget < 0 {
		return nil, fmt.Errorf("deny budget %d is negative", in.DenyBudget)
	}
	in.LookupEnv = asked.lookupEnv(in.LookupEnv)
	v := newView()
	v.asked = asked
	c := &compiler{in: in, budget: in.DenyBudget, fs: v,
		access: map[PathRule]Access{}, writable: map[string]bool{}, exec: map[string]bool{},
		denies: map[string]bool{}, why: map[string]string{}, notes: map[string]bool{}}
	if c.budget == 0 {
		c.budget = DefaultDenyBudget
	}
	if !filepath.IsAbs(in.Home) {
		return nil, fmt.Errorf("home %q is not an absolute path", in.Home)
	}
	var err error
	if c.home, err = c.fs.resolve(in.Home); err != nil {
		return nil, fmt.Errorf("home: %w", err)
	}
	if in.Workspace != "" {
		if !filepath.IsAbs(in.Workspace) {
			return nil, fmt.Errorf("workspace %q is not an absolute path", in.Workspace)
		}
		if c.ws, err = c.fs.evalSymlinks(in.Workspace); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		if st, err := c.fs.stat(c.ws); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("workspace %s is not a directory", c.ws)
		}
	}
	return c, nil
}

// subject names the bundle and tool for error messages.
func (c *compiler) subject() string {
	if c.in.Tool == nil {
		return c.in.Bundle.Key()
	}
	return c.in.Bundle.Key() + " " + c.in.Tool.CommandPath()
}

// described names the bundle and tool for Explain: "jq@1 (tool filter)".
func (c *compiler) described() string {
	if c.in.Tool == nil {
		return c.in.Bundle.Key()
	}
	return c.in.Bundle.Key() + " (tool " + c.in.Tool.CommandPath() + ")"
}

func (c *compiler) note(format string, args ...any) { c.notes[fmt.Sprintf(format, args...)] = true }

func (c *compiler) compile() (*Policy, error) {
	var toolSandbox *manifest.Sandbox
	if c.in.Tool != nil {
		toolSandbox = c.in.Tool.Tool.Sandbox
	}
	eff := manifest.EffectiveSandbox(c.in.Bundle.CLI.Sandbox, toolSandbox)
	fsb := eff.FS
	if fsb == nil {
		fsb = &manifest.FS{}
	}
	if err := c.allowList(fsb.Read, "read", Read); err != nil {
		return nil, err
	}
	if err := c.allowList(fsb.Write, "write", Read|Write); err != nil {
		return nil, err
	}
	bin, err := c.execs(c.in.Binary, eff.Exec)
	if err != nil {
		return nil, err
	}
	runtime, err := runtimeSet(c.fs, bin)
	if err != nil {
		return nil, err
	}
	if err := c.mandatoryDenies(); err != nil {
		return nil, err
	}
	for i, d := range fsb.Deny {
		if err := c.denyPattern(d); err != nil {
			return nil, fmt.Errorf("fs.deny[%d] %q: %w", i, d, err)
		}
	}
	for _, e := range slices.Sorted(maps.Keys(c.exec)) {
		if d := c.deniedBy(e); d != "" {
			return nil, fmt.Errorf("executable %s lies inside the denied path %s", e, d)
		}
		c.grant(PathRule{Path: e}, Read|Exec)
	}
	p := &Policy{Binary: bin, Exec: slices.Sorted(maps.Keys(c.exec)), Rules: c.rules(),
		origin: origin{subject: c.described(), workspace: c.ws, read: fsb.Read, write: fsb.Write, why: c.why}}
	p.Runtime = c.keepAllowed(runtime, "runtime")
	protect, err := c.protectPaths()
	if err != nil {
		return nil, err
	}
	for _, w := range slices.Sorted(maps.Keys(c.writable)) {
		if d := c.deniedBy(w); d != "" {
			c.note("fs.write %s lies inside the denied path %s: not writable (deny wins)", w, d)
			continue
		}
		if pr, ok := coveringAny(w, protect); ok {
			c.note("fs.write %s lies inside %s, which clihost reads bundles from: not writable", w, pr)
			continue
		}
		p.Writable = append(p.Writable, w)
	}
	p.gitGlobal = c.gitGlobalFiles()
	p.Deny = outermost(c.denies)
	for _, d := range p.Deny {
		if n := c.hardLinks(d); n > 1 {
			c.note("fs.deny: %s has %d hard links: its content stays readable through its other names inside an allowed tree (masks and Landlock judge names and the trees they lie in, not inodes)", d, n)
		}
	}
	p.takeState()
	for _, pr := range protect {
		if writableRoot(pr, p.Writable) != "" && c.deniedBy(pr) == "" {
			p.Protect = append(p.Protect, pr)
		}
	}
	if p.Egress, p.Ingress, err = network(eff.Network); err != nil {
		return nil, err
	}
	var pass []string
	var set map[string]string
	if eff.Env != nil {
		pass, set = eff.Env.Pass, eff.Env.Set
	}
	env, refused := Env(c.in.LookupEnv, pass, set)
	p.Env = env
	for _, name := range refused {
		c.note("env: %q is refused (it is not a valid name or it makes programs load code; see Env)", name)
	}
	p.TTY = eff.TTY != nil && eff.TTY.Required
	p.Notes = slices.Sorted(maps.Keys(c.notes))
	return p, nil
}

// protectPaths resolves Input.Protect: the paths that exist, symbolic links resolved, sorted.
func (c *compiler) protectPaths() ([]string, error) {
	var out []string
	for _, p := range slices.Concat(c.in.Protect, homePaths(c.home, homeBinDirs)) {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("protected path %q is not an absolute path", p)
		}
		r, err := c.fs.evalSymlinks(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("protected path: %w", err)
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// coveringAny returns the first of dirs that p lies within.
func coveringAny(p string, dirs []string) (string, bool) {
	for _, d := range dirs {
		if within(p, d) {
			return d, true
		}
	}
	return "", false
}

// hardLinks returns the link count of p when it is a regular file, else 0.
func (c *compiler) hardLinks(p string) uint64 {
	st, err := c.fs.lstat(p)
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Nlink)
	}
	return 0
}

// grant records a rule, merging the rights of rules on the same path and kind.
func (c *compiler) grant(r PathRule, a Access) {
	r.Access = 0
	c.access[r] |= a
}

// rules returns the merged grants, dropping those inside a denied path.
func (c *compiler) rules() []PathRule {
	var out []PathRule
	for r, a := range c.access {
		r.Access = a
		out = append(out, r)
	}
	slices.SortFunc(out, comparePathRule)
	return c.keepAllowed(out, "fs")
}

// keepAllowed drops the rules that lie inside a denied path, noting each.
func (c *compiler) keepAllowed(rules []PathRule, what string) []PathRule {
	var out []PathRule
	for _, r := range rules {
		if d := c.deniedBy(r.Path); d != "" {
			c.note("%s rule on %s lies inside the denied path %s: dropped (deny wins)", what, r.Path, d)
			continue
		}
		out = append(out, r)
	}
	return out
}

// deniedBy returns the denied path p (clean and absolute, as every denied path is) is or lies
// inside, the nearest one, or "": p and each of its parents are looked up, up to /.
func (c *compiler) deniedBy(p string) string {
	for cur := p; ; cur = filepath.Dir(cur) {
		if c.denies[cur] {
			return cur
		}
		if cur == "/" || cur == "." {
			return ""
		}
	}
}

func comparePathRule(a, b PathRule) int {
	if n := strings.Compare(a.Path, b.Path); n != 0 {
		return n
	}
	switch {
	case a.Subtree == b.Subtree:
		return int(a.Access) - int(b.Access)
	case !a.Subtree:
		return -1
	}
	return 1
}

// network normalises the egress hosts (lowercase, no trailing dot, checked like the manifest
// linter does) and the ingress URLs. Both are nil when nothing is declared.
func network(n *manifest.Network) (egress, ingress []string, err error) {
	if n == nil {
		return nil, nil, nil
	}
	for i, h := range n.Egress {
		norm := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
		if err := manifest.CheckEgressHost(norm); err != nil {
			return nil, nil, fmt.Errorf("network.egress[%d]: %w", i, err)
		}
		egress = append(egress, norm)
	}
	for i, u := range n.Ingress {
		if u = strings.TrimSpace(u); u != "" {
			if _, err := IngressPort(u); err != nil {
				return nil, nil, fmt.Errorf("network.ingress[%d]: %w", i, err)
			}
			ingress = append(ingress, u)
		}
	}
	slices.Sort(egress)
	slices.Sort(ingress)
	return slices.Compact(egress), slices.Compact(ingress), nil
}

// IngressPort returns the TCP port of an ingress URL, which must be an http or https URL on the
// loopback (localhost, 127.0.0.1 or [::1]): the host exposes it on its own loopback only.
func IngressPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return 0, fmt.Errorf("%q: an ingress URL is http:// or https://", raw)
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
	default:
		return 0, fmt.Errorf("%q: clihost exposes ingress on the loopback only (localhost)", raw)
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return 0, fmt.Errorf("%q: port %q", raw, p)
		}
	}
	return port, nil
}
