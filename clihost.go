// Package clihost is the Go API for embedding clihost (AIP-29's defineCli, Go-native): a Go
// program loads CLI bundles (from folders, from an fs.FS, or defined in code with DefineCli and
// DefineTool), installs and verifies their CLIs, runs their setup and login, and calls their tools
// in the kernel sandbox, exactly as clihostd does for its agents.
//
// A Host is the entry point:
//
//	h, err := clihost.New(ctx, clihost.WithCatalog(), clihost.WithStateDir(dir))
//	...
//	res, err := h.Call(ctx, "jq", "eval", map[string]any{"filter": ".a", "json": `{"a":1}`}, clihost.CallOptions{})
//
// Every tool runs in the kernel sandbox (namespaces, Landlock, seccomp, the egress proxy), and so
// do version checks, setup steps and logins; there is no option to turn it off. Installing a CLI
// is the exception: Install runs the bundle's installers outside it (see Host.Install). Failures are *Error values carrying an errcode.Code (errors.As);
// a call's result is the same envelope clihostd returns (callresult.Envelope).
//
// # The sandbox's init
//
// The sandbox is built by an init process that clihost starts for every call: the
// clihost-sandbox helper when it is installed beside the program's executable, else the
// program's own executable re-executed. Importing this package makes the program able to act as
// that init: it imports sandbox/nsinit/entry for its side effect, which takes over the process
// during package initialisation when it was started as the init (a marker as its first argument),
// before main runs. Nothing else is needed: no TestMain, no call in main. (The init functions
// of packages initialised before it still run in the init: keep them free of side effects, or
// install the helper.) The helper starts
// sandboxes a little faster (go build -o DIR/clihost-sandbox github.com/clihost/clihost/cmd/clihost-sandbox
// beside the program). The program needs what clihostd needs to build a sandbox: root, or
// unprivileged user namespaces (clihostctl doctor says which the machine offers).
//
// # Identity
//
// A program running as root runs no CLI as root: calls run as WithAgentUser's user, else as the
// workspace's owner when that is not root, else as nobody (docs/operations.md, "Identity"); an
// unprivileged program runs its CLIs as itself, in a user namespace.
package clihost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/authstate"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
	"github.com/clihost/clihost/setup"
	"github.com/clihost/clihost/store"

	// The program importing clihost becomes the sandbox's init when started as one (see the
	// package documentation, "The sandbox's init").
	_ "github.com/clihost/clihost/sandbox/nsinit/entry"
)

// ErrNoState is returned by Install, Setup, Login and Logout on a Host made without a state
// directory (WithStateDir), which keeps no records.
var ErrNoState = errors.New("clihost: this Host keeps no state: make it WithStateDir to install, set up or log in")

// Host loads bundles and runs their CLIs. Its methods may be called from several goroutines.
// Close releases its state directory.
type Host struct {
	h         *host.Host
	reg       *registry.Registry
	workspace string
	user      string
	stateDir  string
	store     *store.Store // nil without WithStateDir
	setup     *setup.Engine
	auth      *authstate.Machine
	installMu sync.Mutex
}

// config is what the options set.
type config struct {
	sources   []registry.Source
	catalog   bool
	defaults  bool // registry.DefaultSources
	dirs      []string
	workspace string
	stateDir  string
	homeDir   string
	audit     io.Writer
	policy    string
	deny      []string
	limits    isolation.Limits
	agent     string
	err       error
}

// An Option configures a Host (New).
type Option func(*config)

// WithBundleDirs loads the bundles found in each directory: a bundle folder, a tree holding
// bundles at any depth, or a CLI.md file. Reads never leave the directory.
func WithBundleDirs(dirs ...string) Option {
	return func(c *config) {
		for _, d := range dirs {
			src, err := registry.DirSource(d)
			if err != nil {
				c.err = errors.Join(c.err, err)
				continue
			}
			c.sources = append(c.sources, src)
			c.dirs = append(c.dirs, d)
		}
	}
}

// WithBundleFS loads the bundles found in fsys (every CLI.md at any depth), named name in lint
// findings. The bundles' files are read through fsys only: a reference leaving the bundle's
// folder (../) is a lint error and the bundle is not served. Such bundles cannot vendor binaries
// (they are not on disk). What fsys itself lets through is its own affair: os.DirFS follows
// symbolic links out of its directory, so a bundle folder on disk from others belongs in
// WithBundleDirs, whose reads never leave it.
func WithBundleFS(name string, fsys fs.FS) Option {
	return func(c *config) {
		if fsys == nil {
			c.err = errors.Join(c.err, fmt.Errorf("clihost: WithBundleFS %q: a nil fs.FS", name))
			return
		}
		c.sources = append(c.sources, registry.Source{Name: name, FS: fsys, Root: ".", Display: under(name, ":")})
	}
}

// WithDefinitions serves bundles defined in code (DefineCli).
func WithDefinitions(defs ...*Definition) Option {
	return func(c *config) {
		for _, d := range defs {
			if d == nil {
				c.err = errors.Join(c.err, errors.New("clihost: WithDefinitions: a nil Definition"))
				continue
			}
			if d.err != nil {
				c.err = errors.Join(c.err, d.err)
				continue
			}
			name := "defined:" + d.cli.ID
			c.sources = append(c.sources, registry.Source{Name: name, FS: d.files, Root: ".", Display: under(name, "/")})
		}
	}
}

// under shows a path p of a source that is not on disk as name, sep and p (name alone for ".").
func under(name, sep string) func(string) string {
	return func(p string) string {
		if p == "." {
			return name
		}
		return name + sep + p
	}
}

// WithCatalog also serves the catalog built into clihost (jq, gh, git, …); a bundle of another
// source with the same id@major replaces the catalog's.
func WithCatalog() Option { return func(c *config) { c.catalog = true } }

// WithDefaultBundles loads bundles where clihostctl does: the directories in $CLIHOST_BUNDLES,
// else ./.cli when it exists plus the built-in catalog (registry.DefaultSources). Directories
// named with WithBundleDirs replace these.
func WithDefaultBundles() Option { return func(c *config) { c.defaults = true } }

// WithWorkspace is the directory tools run in (default: the current directory).
func WithWorkspace(dir string) Option { return func(c *config) { c.workspace = dir } }

// WithStateDir keeps state in dir (created 0700): the record of installed CLIs and the binaries
// installed there, setup answers and secrets, login state, and the homes of uids without one.
// Calls are then gated on setup and login as clihostd gates them. A running clihostd's state
// directory is locked by it (store.ErrLocked). It must lie apart from the workspace (neither
// inside the other, symlinks resolved): New refuses it otherwise, since tools allowed to write
// their workspace could replace the CLIs installed there. Without it the Host keeps nothing:
// calls are not gated on setup or login, and Install, Setup and Login return ErrNoState.
func WithStateDir(dir string) Option { return func(c *config) { c.stateDir = dir } }

// WithHomeDir gives uids without a usable home of their own <dir>/homes/<uid> as HOME, on a Host
// without a state directory (WithStateDir implies it for its own directory).
func WithHomeDir(dir string) Option { return func(c *config) { c.homeDir = dir } }

// WithAudit writes one JSON line per call (and per egress decision) to w. When w is a file, mask it
// with WithDeny (clihostd masks its own audit log): a tool allowed to write it could forge lines.
func WithAudit(w io.Writer) Option { return func(c *config) { c.audit = w } }

// WithApprovalPolicy enforces the approval policy in file (docs/operations.md, Approvals; a file
// that does not exist means no rules). An absolute file is masked in every sandbox.
func WithApprovalPolicy(file string) Option { return func(c *config) { c.policy = file } }

// WithDeny masks these absolute paths in every sandbox (files of the embedding program's own that
// no CLI may see).
func WithDeny(paths ...string) Option {
	return func(c *config) {
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				c.err = errors.Join(c.err, fmt.Errorf("clihost: WithDeny: %q is not an absolute path", p))
			}
		}
		c.deny = append(c.deny, paths...)
	}
}

// WithLimits are the operator's per-call resource limits (a zero field takes the default, a
// negative one means no limit); bundles and tools may only narrow them.
func WithLimits(l isolation.Limits) Option { return func(c *config) { c.limits = l } }

// WithAgentUser is whom a program running as root runs the CLIs as, in workspaces that user may
// use (clihostd --agent-user): by default the workspace's owner, or nobody for root's own. Never
// root. It changes nothing for a program that is not root (its CLIs run as itself).
func WithAgentUser(name string) Option { return func(c *config) { c.agent = name } }

// New loads the bundles of the options' sources and makes a Host over them. Bundles with lint
// errors are loaded (Lint reports them) but never called.
func New(ctx context.Context, opts ...Option) (*Host, error) {
	c, err := configOf(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reg, err := c.registry()
	if err != nil {
		return nil, err
	}
	ws, err := workspaceDir(c.workspace)
	if err != nil {
		return nil, err
	}
	h := &Host{reg: reg, workspace: ws, user: currentUser()}
	policy, err := c.approvals()
	if err != nil {
		return nil, err
	}
	hopts := host.Options{Audit: c.audit, Approvals: approval.NewGate(policy),
		Sandbox: host.SandboxOptions{ExtraDeny: c.deny, Limits: c.limits, StateDir: c.homeDir}}
	if hopts.Sandbox.AgentUID, hopts.Sandbox.AgentGID, err = agentIDs(c.agent); err != nil {
		return nil, err
	}
	if c.stateDir != "" {
		if err := apart(c.stateDir, ws); err != nil {
			return nil, err
		}
		if err := h.openState(c.stateDir, &hopts); err != nil {
			return nil, err
		}
	}
	h.h = host.New(reg, hopts)
	return h, nil
}

// configOf applies opts; the error is the options' own (a nil Option among them).
func configOf(opts []Option) (*config, error) {
	c := &config{}
	for i, o := range opts {
		if o == nil {
			c.err = errors.Join(c.err, fmt.Errorf("clihost: option %d is nil", i+1))
			continue
		}
		o(c)
	}
	return c, c.err
}

// registry loads the configured sources.
func (c *config) registry() (*registry.Registry, error) {
	srcs := c.sources
	if c.defaults && len(c.dirs) == 0 {
		def, err := registry.DefaultSources(nil)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, def...)
	}
	if c.catalog && !slices.ContainsFunc(srcs, func(s registry.Source) bool { return s.Embedded }) {
		srcs = append(srcs, registry.EmbeddedSource())
	}
	return registry.Load(srcs...)
}

// approvals loads the approval policy and masks its file.
func (c *config) approvals() (*approval.Policy, error) {
	if c.policy == "" {
		return approval.LoadPolicy("")
	}
	if abs, err := filepath.Abs(c.policy); err == nil {
		c.policy = abs
	}
	c.deny = append(c.deny, c.policy)
	return approval.LoadPolicy(c.policy)
}

// apart refuses a state directory that is, contains or lies inside the workspace (symlinks
// resolved): a tool allowed to write its workspace could then replace the CLIs Install placed in
// the state directory's bin/ and the homes it keeps.
func apart(stateDir, workspace string) error {
	state, err := host.ResolvedPath(stateDir)
	if err != nil {
		return fmt.Errorf("clihost: state directory: %w", err)
	}
	ws, err := host.ResolvedPath(workspace)
	if err != nil {
		return fmt.Errorf("clihost: workspace: %w", err)
	}
	if within(state, ws) || within(ws, state) {
		return fmt.Errorf("clihost: the state directory %s overlaps the workspace %s: tools that may write their workspace "+
			"could replace the CLIs installed there (keep the state outside the workspace, e.g. under os.UserConfigDir or /var/lib)", stateDir, workspace)
	}
	return nil
}

// within reports whether p is dir or lies inside it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// openState opens the store in dir and wires setup, login and installed binaries into opts.
func (h *Host) openState(dir string, opts *host.Options) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("clihost: state directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("clihost: state directory: %w", err)
	}
	if h.store, err = store.Open(dir, store.Options{}); err != nil {
		return fmt.Errorf("clihost: state directory %s: %w", dir, err)
	}
	secrets, err := store.OpenSecrets(h.store, filepath.Join(dir, "secrets.key"))
	if err != nil {
		h.store.Close()
		return fmt.Errorf("clihost: secrets: %w", err)
	}
	h.stateDir = dir
	h.setup = &setup.Engine{Store: h.store, Secrets: secrets}
	h.auth = &authstate.Machine{Store: h.store}
	opts.Setup, opts.Auth, opts.Locate = h.setup, h.auth, h.locate
	opts.Sandbox.StateDir = dir
	for _, name := range []string{"state.db", "secrets.key"} { // never its bin/: installed CLIs run from there
		opts.Sandbox.ExtraDeny = append(opts.Sandbox.ExtraDeny, filepath.Join(dir, name))
	}
	return nil
}

// Close releases the state directory. The Host must not be used afterwards.
func (h *Host) Close() error {
	if h.store == nil {
		return nil
	}
	return h.store.Close()
}

// Bundle is a loaded bundle: its identity and where it came from.
type Bundle struct {
	Key   string   // id@major
	ID    string   // the manifest's id
	File  string   // its CLI.md, as shown in findings
	Bin   string   // the CLI's program (CLI.md's bin)
	Tools []string // its tools: each one's id, or its command path when its TOOL.md did not load
	// Dir is the bundle's folder on disk ("" for the catalog, an fs.FS or a definition).
	Dir string
	// Install are its install entries, in the order Install tries them.
	Install []manifest.InstallMethod
	// Served reports that the bundle has no lint errors: only served bundles' tools can be called.
	Served bool
}

// Bundle finds a loaded bundle by id or id@major (the highest major for an id). The error is a
// *Error: not_found, or bundle_invalid for a bundle with lint errors, which is never served.
func (h *Host) Bundle(name string) (Bundle, error) {
	b, err := h.bundle(name)
	if err != nil {
		return Bundle{}, err
	}
	return bundleOf(b), nil
}

// Bundles lists the loaded bundles (one per id@major), sorted by key.
func (h *Host) Bundles() []Bundle {
	var out []Bundle
	for _, b := range h.reg.Bundles() {
		out = append(out, bundleOf(b))
	}
	return out
}

func bundleOf(b *manifest.Bundle) Bundle {
	info := Bundle{Key: b.Key(), ID: b.ID(), File: b.File, Dir: b.OSDir, Served: !b.Findings.HasErrors()}
	if b.CLI != nil {
		info.Bin, info.Install = b.CLI.Bin, b.CLI.Install
	}
	for _, t := range b.Tools {
		name := strings.Join(t.Path, " ")
		if t.Tool != nil && t.Tool.ID != "" {
			name = t.Tool.ID
		}
		info.Tools = append(info.Tools, name)
	}
	return info
}

// bundle finds a served bundle by id or id@major, or returns a *Error (not_found, bundle_invalid).
func (h *Host) bundle(name string) (*manifest.Bundle, error) {
	b, err := h.reg.Get(name)
	if err != nil {
		return nil, newError(notFound(err))
	}
	if _, err := h.h.Bundle(name); err != nil {
		return nil, newError(bundleInvalid(b, err))
	}
	return b, nil
}

// caller is the Host's own caller: its workspace and user, no control-socket peer.
func (h *Host) caller() host.Caller { return host.Caller{Workspace: h.workspace, User: h.user} }

// locate lists where Install put a bundle's binary (as clihostd's Locate does).
func (h *Host) locate(b *manifest.Bundle) []string {
	var out []string
	var rec installRecord
	if _, ok, err := h.store.Get(store.BucketInstall, b.Key(), &rec); err == nil && ok && rec.BinPath != "" {
		out = append(out, rec.BinPath)
	}
	return append(out, filepath.Join(install.BinDir(h.stateDir, b.Key()), filepath.Base(b.CLI.Bin)))
}

// workspaceDir is dir (default: the current directory), absolute; it must be a directory.
func workspaceDir(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("clihost: workspace: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("clihost: workspace: %w", err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", fmt.Errorf("clihost: workspace %s is not a directory", abs)
	}
	return abs, nil
}

// agentIDs looks up WithAgentUser's user ("": none).
func agentIDs(name string) (uid, gid int, err error) {
	if name == "" {
		return 0, 0, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("clihost: agent user: %w", err)
	}
	if uid, err = strconv.Atoi(u.Uid); err != nil || uid == 0 {
		return 0, 0, fmt.Errorf("clihost: agent user %s: uid %s: CLIs never run as root", name, u.Uid)
	}
	if gid, err = strconv.Atoi(u.Gid); err != nil {
		return 0, 0, fmt.Errorf("clihost: agent user %s: gid %s: %w", name, u.Gid, err)
	}
	return uid, gid, nil
}

// currentUser names the process's user (its uid when it has no name).
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}
