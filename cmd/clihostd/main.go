// Command clihostd is the clihost daemon: it loads CLI bundles, keeps their lifecycle state (what is
// installed, which version) in bbolt under its state directory, serves every bundle's tools over MCP
// streamable HTTP behind a bearer token, and answers clihostctl on a unix socket.
//
// With no flags it serves ./.cli plus the built-in catalog, keeps state under the user's state
// directory (or systemd's StateDirectory) and prints where its socket, MCP endpoint and token are.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
	"github.com/clihost/clihost/sandbox/egress"
	"github.com/clihost/clihost/sandbox/nsinit"

	_ "github.com/clihost/clihost/sandbox/nsinit/entry" // this executable is also the sandbox's init: it runs first
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// config is clihostd's command line.
type config struct {
	stateDir  string
	socket    string
	bundles   stringList
	noCatalog bool // --no-catalog: serve only the --bundles folders
	workspace string
	httpAddr  string
	group     string
	check     bool
	sandbox   string        // "on" or "off"
	agentUser string        // who bundle processes run as when the daemon is root
	admit     stringList    // --egress-admit: CIDR ranges allowed names may resolve to
	limits    nsinit.Limits // --limit-*: the operator's per-call resource limits (host.SandboxOptions.Limits)
	ports     string        // --egress-ports: comma-separated destination ports
	maxConns  int           // --egress-max-conns: egress connections one call may hold at once

	auditMaxSize byteSize // --audit-max-size: the audit log's size before it is rotated
	auditKeep    int      // --audit-keep: rotated audit logs kept
	approvals    string   // --approvals: the operator's approval policy file
	// drain is how long SIGTERM waits for the calls in flight before it cancels them.
	drain time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("clihostd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.stateDir, "state", "", "state directory (default: $STATE_DIRECTORY, else $XDG_STATE_HOME/clihost, else ~/.local/state/clihost)")
	fs.StringVar(&c.socket, "socket", "", "control socket (default: $RUNTIME_DIRECTORY/clihostd.sock, else $XDG_RUNTIME_DIR/clihost/clihostd.sock, else <state>/clihostd.sock)")
	fs.Var(&c.bundles, "bundles", "a bundle directory (repeatable), served beside the built-in catalog (a bundle there replaces the catalog's of the same id@major); default $CLIHOST_BUNDLES, else ./.cli")
	fs.BoolVar(&c.noCatalog, "no-catalog", false, "serve only the --bundles folders, not the built-in catalog")
	fs.StringVar(&c.workspace, "workspace", "", "the directory tools run in for MCP clients (default: the current directory)")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:8931", "MCP and metrics listener (loopback unless you mean it; port 0 picks one)")
	fs.StringVar(&c.group, "group", "", "a group whose members may use the control socket, besides its owner and root")
	fs.StringVar(&c.sandbox, "sandbox", "on", "the kernel sandbox for every bundle process: on, or off (DANGEROUS: CLIs then run with the daemon's full rights; every result and status says so)")
	fs.StringVar(&c.agentUser, "agent-user", "", "when clihostd runs as root: the user bundle processes run as (default: each workspace's owner, or nobody when root owns it)")
	fs.Var(&c.admit, "egress-admit", "a CIDR range (repeatable) that bundles' allowed hosts may resolve to although it is loopback, private or link-local (e.g. a test network); IP literals stay refused")
	fs.StringVar(&c.ports, "egress-ports", "80,443,22", "the destination ports bundles' egress hosts may be reached on")
	fs.IntVar(&c.maxConns, "egress-max-conns", egress.DefaultMaxConns, "the egress connections one call may hold at once, its HTTP proxy, SOCKS5 server and transparent capture together; past it a new connection is closed at once and audited as refused")
	c.auditMaxSize = host.AuditMaxSize
	fs.Var(&c.auditMaxSize, "audit-max-size", "rotate the audit log (<state>/audit.jsonl) when it would grow past this size (bytes, or with a KiB, MiB or GiB suffix)")
	fs.IntVar(&c.auditKeep, "audit-keep", host.AuditKeep, "how many rotated audit logs (audit.jsonl.1 … .N) to keep; 0 keeps none")
	fs.StringVar(&c.approvals, "approvals", approval.DefaultPolicyFile(), "the approval policy: which tools run without asking, are asked for or refused (docs/operations.md, Approvals); a missing file means none, one that does not parse stops the daemon")
	fs.DurationVar(&c.drain, "drain-timeout", 10*time.Second, "on SIGTERM or SIGINT: how long calls in flight may still run before they are canceled (their sandboxes get SIGTERM, then SIGKILL 2s later) and the daemon exits")
	for _, f := range host.LimitFlags(&c.limits) {
		fs.Var(f.Value, f.Name, f.Usage)
	}
	checkStateFlag := fs.Bool("check-state", false, "check the state database (<state>/state.db) with bbolt's consistency check, print a report and exit (1 when it is damaged or unreadable)")
	fs.BoolVar(&c.check, "check", false, "load and validate the bundles, print the result and exit (1 when any bundle is refused or none is loaded)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if abs, err := filepath.Abs(c.approvals); err == nil && c.approvals != "" {
		c.approvals = abs // masked in every sandbox, and read again on reloads from wherever
	}
	if c.auditKeep < 0 {
		fmt.Fprintf(stderr, "clihostd: --audit-keep %d: want 0 or more\n", c.auditKeep)
		return 2
	}
	if c.maxConns < 1 {
		fmt.Fprintf(stderr, "clihostd: --egress-max-conns %d: want 1 or more\n", c.maxConns)
		return 2
	}
	if c.drain < 0 {
		fmt.Fprintf(stderr, "clihostd: --drain-timeout %v: must not be negative\n", c.drain)
		return 2
	}
	if c.sandbox != "on" && c.sandbox != "off" {
		fmt.Fprintf(stderr, "clihostd: --sandbox %q: want on or off\n", c.sandbox)
		return 2
	}
	if *checkStateFlag {
		return checkState(os.Stdout, stderr, c.stateDir)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if c.check {
		return check(log, c)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := start(ctx, log, c)
	if err != nil {
		log.Error("clihostd could not start", "err", err)
		fmt.Fprintf(stderr, "clihostd: %v\n", err)
		return 1
	}
	if err := d.serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("clihostd stopped", "err", err)
		return 1
	}
	return 0
}

// check loads the bundles once and reports each as loaded or refused, and each warning (a missing
// or empty folder, no bundles at all). It fails when a bundle is refused or none is loaded: a
// daemon that would serve nothing fails its check.
func check(log *slog.Logger, c config) int {
	_, sum, err := loadBundles(log, c)
	if err != nil {
		log.Error("loading bundles failed", "err", err)
		return 1
	}
	policy, perr := approval.LoadPolicy(c.approvals)
	if perr != nil {
		log.Error("approval policy refused", "err", perr)
	} else {
		log.Info("approval policy", "file", c.approvals, "rules", len(policy.Rules), "policies", len(policy.Policies))
	}
	if sum.Refused > 0 || sum.Loaded == 0 || perr != nil {
		return 1
	}
	return 0
}

// logBundles logs each bundle as loaded or refused (a bundle with lint errors is refused) and
// returns how many were refused.
// firstError is the first error among findings, as lint prints it ("" when there is none: a
// bundle refused as a duplicate, which the registry's findings name).
func firstError(fs manifest.Findings) string {
	for _, f := range fs {
		if f.Severity == manifest.SeverityError {
			return f.String()
		}
	}
	return ""
}

func logBundles(log *slog.Logger, reg *registry.Registry) int {
	refused := 0
	for _, e := range reg.Entries() {
		b := e.Bundle
		errs, warns := b.Findings.Count()
		if errs > 0 || !e.Indexed {
			refused++
			log.Warn("bundle refused", "bundle", b.Key(), "file", b.File, "errors", errs, "reason", firstError(b.Findings), "hint", "run: clihostctl lint "+b.Dir)
			continue
		}
		log.Info("bundle loaded", "bundle", b.Key(), "source", e.Source, "tools", len(b.Tools), "warnings", warns)
	}
	for _, f := range reg.Findings {
		log.Warn("registry", "finding", f.String())
	}
	return refused
}
