// Command clihostd is the clihost daemon: it loads CLI bundles, keeps their lifecycle state (what is
// installed, which version) in bbolt under its state directory, serves every bundle's tools over MCP
// streamable HTTP behind a bearer token, and answers clihostctl on a unix socket.
//
// With no flags it serves ./.cli plus the built-in catalog, keeps state under the user's state
// directory (or systemd's StateDirectory) and prints where its socket, MCP endpoint and token are.
// The daemon itself is package daemon; this command parses its flags, sets up logging and signals,
// and runs a daemon.Engine.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/daemon"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/buildinfo"
	"github.com/clihost/clihost/internal/config"

	_ "github.com/clihost/clihost/sandbox/nsinit/entry" // this executable is also the sandbox's init: it runs first
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// List is the values, for the configuration file (config.FromFlagSet).
func (l *stringList) List() []string { return *l }

// options is clihostd's command line: the engine's configuration and what only the command uses.
type options struct {
	cfg        daemon.Config
	bundles    stringList
	admit      stringList
	sandbox    string // "on" or "off"
	auditSize  daemon.ByteSize
	help       bool // -h or --help was given: the flags were printed
	check      bool
	checkState bool
	cpuProfile string
	memProfile string
	version    bool
	// configFile is --config; printConfig --print-config; logFormat --log-format.
	configFile  string
	printConfig bool
	logFormat   string
	// keys are the configuration file's keys (the flags but commandLineOnly), with their values;
	// configRead says configFile was read (it exists).
	keys       *config.Section
	configRead bool
}

// DefaultConfigFile is the configuration file clihostd reads when it exists (--config).
const DefaultConfigFile = "/etc/clihost/clihostd.yaml"

// commandLineOnly are the flags without a key in the configuration file: they name the file, or
// make the command do something else than serve.
var commandLineOnly = []string{"config", "print-config", "check", "check-state", "cpuprofile", "memprofile", "version"}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// parse reads args into options; it returns 0 when they are usable, else the exit code (2).
func parse(args []string, stderr io.Writer) (options, int) {
	fs := flag.NewFlagSet("clihostd", flag.ContinueOnError)
	var usage bytes.Buffer // the flag package's messages: help to stdout, mistakes to stderr
	fs.SetOutput(&usage)
	o := options{auditSize: daemon.ByteSize(host.AuditMaxSize)}
	c := &o.cfg
	fs.StringVar(&c.StateDir, "state", "", "state directory (default: $STATE_DIRECTORY, else $XDG_STATE_HOME/clihost, else ~/.local/state/clihost)")
	fs.StringVar(&c.Socket, "socket", "", "control socket (default: $RUNTIME_DIRECTORY/clihostd.sock, else $XDG_RUNTIME_DIR/clihost/clihostd.sock, else <state>/clihostd.sock)")
	fs.Var(&o.bundles, "bundles", "a bundle directory (repeatable), served beside the built-in catalog (a bundle there replaces the catalog's of the same id@major); default $CLIHOST_BUNDLES, else ./.cli")
	fs.BoolVar(&c.NoCatalog, "no-catalog", false, "serve only the --bundles folders, not the built-in catalog")
	fs.StringVar(&c.Workspace, "workspace", "", "the directory tools run in for MCP clients (default: the current directory)")
	fs.StringVar(&c.HTTPAddr, "http", "127.0.0.1:8931", "MCP and metrics listener (loopback unless you mean it; port 0 picks one)")
	fs.StringVar(&c.Group, "group", "", "a group whose members may use the control socket, besides its owner and root")
	fs.StringVar(&o.sandbox, "sandbox", "on", "the kernel sandbox for every bundle process: on, or off (DANGEROUS: CLIs then run with the daemon's full rights; every result and status says so)")
	fs.StringVar(&c.AgentUser, "agent-user", "", "when clihostd runs as root: the user bundle processes run as (default: each workspace's owner, or nobody when root owns it)")
	fs.Var(&o.admit, "egress-admit", "a CIDR range (repeatable) that bundles' allowed hosts may resolve to although it is loopback, private or link-local (e.g. a test network); IP literals stay refused")
	fs.StringVar(&c.EgressPorts, "egress-ports", "80,443,22", "the destination ports bundles' egress hosts may be reached on")
	fs.IntVar(&c.EgressMaxConns, "egress-max-conns", daemon.DefaultEgressMaxConns, "the egress connections one call may hold at once, its HTTP proxy, SOCKS5 server and transparent capture together; past it a new connection is closed at once and audited as refused")
	fs.Var(&o.auditSize, "audit-max-size", "rotate the audit log (<state>/audit.jsonl) when it would grow past this size (bytes, or with a KiB, MiB or GiB suffix)")
	fs.IntVar(&c.AuditKeep, "audit-keep", host.AuditKeep, "how many rotated audit logs (audit.jsonl.1 … .N) to keep; 0 keeps none")
	fs.StringVar(&c.Approvals, "approvals", approval.DefaultPolicyFile(), "the approval policy: which tools run without asking, are asked for or refused (docs/operations.md, Approvals); a missing file means none, one that does not parse stops the daemon")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM or SIGINT: how long calls in flight may still run before they are canceled (their sandboxes get SIGTERM, then SIGKILL 2s later) and the daemon exits")
	fs.IntVar(&c.BreakerThreshold, "breaker-threshold", daemon.DefaultBreakerThreshold, "consecutive failed calls of a provider bundle's tool that open its circuit breaker (calls refused with provider_unavailable)")
	fs.DurationVar(&c.BreakerCooldown, "breaker-cooldown", daemon.DefaultBreakerCooldown, "how long a provider's open circuit breaker refuses calls before it lets one probe call through")
	fs.IntVar(&c.MaxCalls, "max-calls", daemon.DefaultMaxCalls, "the most calls the daemon runs at once that their callers wait for (0: no bound); past it a call is refused with rate_limited, nothing run")
	fs.IntVar(&c.MaxCallsPerCaller, "max-calls-per-caller", daemon.DefaultMaxCallsPerCaller, "the most calls one caller (a control socket's user, an MCP agent's token) has running at once, a call whose sandbox did not end when it was killed included (0: no bound); past it its calls are refused with rate_limited")
	fs.IntVar(&c.SandboxPool, "sandbox-pool", daemon.DefaultSandboxPool(), "the most sandbox inits kept started ahead of calls, each serving one call (0: none; every call then starts its own, about 2-3 ms slower)")
	for _, f := range host.LimitFlags(&c.Limits) {
		fs.Var(f.Value, f.Name, f.Usage)
	}
	fs.BoolVar(&o.checkState, "check-state", false, "check the state database (<state>/state.db) with bbolt's consistency check, print a report and exit (1 when it is damaged or unreadable)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the daemon, from start to stop, to this file (for performance work; off by default)")
	fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of the daemon, from start to stop, to this file when it stops (for performance work; off by default)")
	fs.BoolVar(&o.version, "version", false, "print clihostd's version (the module version, or the VCS revision it was built from) and exit")
	fs.BoolVar(&o.check, "check", false, "load and validate the bundles, print the result and exit (1 when any bundle is refused or none is loaded)")
	fs.StringVar(&o.logFormat, "log-format", "text", "the log's format on stderr: text (key=value) or json (one object a line)")
	fs.StringVar(&o.configFile, "config", DefaultConfigFile, "the configuration file (YAML, a key per flag; flags given here override it); read when it exists, required when named; \"\" for none")
	fs.BoolVar(&o.printConfig, "print-config", false, "print the effective configuration (the file's format: the file's values and the flags over the defaults) and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h, --help: asked for, so not a mistake
			o.help = true
			_, _ = os.Stdout.Write(usage.Bytes())
			return o, 0
		}
		_, _ = stderr.Write(usage.Bytes())
		return o, 2
	}
	if err := o.readConfig(fs); err != nil {
		fmt.Fprintf(stderr, "clihostd: %v\n", err)
		return o, 2
	}
	if abs, err := filepath.Abs(c.Approvals); err == nil && c.Approvals != "" {
		c.Approvals = abs // masked in every sandbox, and read again on reloads from wherever
	}
	c.Bundles, c.EgressAdmit, c.AuditMaxSize, c.SandboxOff, c.Version = o.bundles, o.admit, int64(o.auditSize), o.sandbox == "off", buildinfo.Read(version).Short()
	var bad string
	switch {
	case c.AuditKeep < 0:
		bad = fmt.Sprintf("--audit-keep %d: want 0 or more", c.AuditKeep)
	case c.EgressMaxConns < 1:
		bad = fmt.Sprintf("--egress-max-conns %d: want 1 or more", c.EgressMaxConns)
	case c.MaxCalls < 0:
		bad = fmt.Sprintf("--max-calls %d: want 0 (no bound) or more", c.MaxCalls)
	case c.MaxCallsPerCaller < 0:
		bad = fmt.Sprintf("--max-calls-per-caller %d: want 0 (no bound) or more", c.MaxCallsPerCaller)
	case c.SandboxPool < 0:
		bad = fmt.Sprintf("--sandbox-pool %d: want 0 or more", c.SandboxPool)
	case c.DrainTimeout < 0:
		bad = fmt.Sprintf("--drain-timeout %v: must not be negative", c.DrainTimeout)
	case o.sandbox != "on" && o.sandbox != "off":
		bad = fmt.Sprintf("--sandbox %q: want on or off", o.sandbox)
	case o.logFormat != "text" && o.logFormat != "json":
		bad = fmt.Sprintf("--log-format %q: want text or json", o.logFormat)
	case c.Group != "" && !o.printConfig:
		bad = checkGroup(c.Group)
	}
	if bad != "" {
		fmt.Fprintf(stderr, "clihostd: %s\n", bad)
		return o, 2
	}
	return o, 0
}

// checkGroup is what is wrong with --group NAME ("" when the group exists): the unit names
// clihost, which only the package's or the documented useradd creates.
func checkGroup(name string) string {
	if _, err := user.LookupGroup(name); err != nil {
		return fmt.Sprintf("--group %s: %v (create it: groupadd --system %s, and add the socket's users with usermod -aG %s USER; or drop --group)", name, err, name, name)
	}
	return ""
}

// readConfig applies the configuration file to the flags fs's command line did not set: the
// default file when it exists, a named one always.
func (o *options) readConfig(fs *flag.FlagSet) error {
	named := false
	fs.Visit(func(f *flag.Flag) { named = named || f.Name == "config" })
	o.keys = config.FromFlagSet(fs, commandLineOnly...)
	o.keys.MarkChanged(fs)
	if o.configFile == "" {
		return nil
	}
	data, err := config.ReadFile(o.configFile, named)
	if err != nil || data == nil {
		return err
	}
	o.configRead = true
	return config.Apply(o.configFile, data, o.keys)
}

// newLogger is the daemon's logger on stderr, in the format --log-format names.
func newLogger(format string, stderr io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, nil))
	}
	return slog.New(slog.NewTextHandler(stderr, nil))
}

func run(args []string, stderr io.Writer) int {
	o, code := parse(args, stderr)
	if code != 0 || o.help {
		return code
	}
	if o.version {
		fmt.Fprintf(os.Stdout, "clihostd %s\n", buildinfo.Read(version))
		return 0
	}
	if o.printConfig {
		if err := config.Print(os.Stdout, o.keys); err != nil {
			fmt.Fprintf(stderr, "clihostd: %v\n", err)
			return 1
		}
		return 0
	}
	if o.checkState {
		if err := daemon.CheckStateFile(os.Stdout, o.cfg.StateDir); err != nil {
			fmt.Fprintf(stderr, "clihostd: %v\n", err)
			return 1
		}
		return 0
	}
	log := newLogger(o.logFormat, stderr)
	if o.configRead {
		log.Info("configuration file read", "file", o.configFile, "keys", strings.Join(o.keys.FromFile(), ","))
	}
	if o.check {
		if daemon.Check(log, o.cfg) != nil {
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for _, p := range []struct {
		path  string
		start func(string) (func(), error)
	}{{o.cpuProfile, startCPUProfile}, {o.memProfile, startMemProfile}} {
		if p.path == "" {
			continue
		}
		finish, err := p.start(p.path)
		if err != nil {
			fmt.Fprintf(stderr, "clihostd: %v\n", err)
			return 1
		}
		defer finish() // at the daemon's stop: the profiles are complete then
	}
	daemon.KeepHeapFloor()
	daemon.RaiseTimerSlack() // a daemon that is not root has its unit's TimerSlackNSec=
	e, err := daemon.New(ctx, log, o.cfg)
	if err != nil {
		log.Error("clihostd could not start", "err", err)
		if o.logFormat != "json" { // a JSON log's every line is an object: the log line says it
			fmt.Fprintf(stderr, "clihostd: %v\n", err)
		}
		return 1
	}
	defer e.Close()
	stopHUP := reloadOnHUP(log, e)
	defer stopHUP()
	if err := e.Serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("clihostd stopped", "err", err)
		return 1
	}
	return 0
}

// reloadOnHUP reloads e's bundles and approval policy on each SIGHUP until the returned function
// is called; a reload that fails keeps the previous ones.
func reloadOnHUP(log *slog.Logger, e *daemon.Engine) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				log.Info("reloading bundles (SIGHUP)")
				if err := e.Reload(); err != nil {
					log.Error("reload failed; keeping the previous bundles", "err", err)
				}
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// startCPUProfile starts writing a CPU profile of this process to a new file at path (mode
// 0600); the returned function stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// startMemProfile creates a new file at path (mode 0600) for an allocation profile of this
// process; the returned function writes the profile of everything allocated since start (the
// runtime samples allocations all along) and closes the file.
func startMemProfile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--memprofile: %w", err)
	}
	return func() { _ = pprof.Lookup("allocs").WriteTo(f, 0); f.Close() }, nil
}
