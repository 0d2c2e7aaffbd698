package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/mcp"
	"github.com/clihost/clihost/registry"
	"github.com/clihost/clihost/store"
)

// Reload reads the bundle sources and the approval policy again and swaps the new generation in.
// On an error (a bundle source that cannot be read, a policy that does not parse) it changes
// nothing: the previous generation and policy stay.
func (d *Engine) Reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	reg, sum, err := loadBundles(d.log, d.cfg)
	if err != nil {
		return err
	}
	if d.cur.Load() != nil { // the first load is New's
		policy, err := approval.LoadPolicy(d.cfg.Approvals)
		if err != nil {
			return fmt.Errorf("approval policy (the previous policy and bundles stay): %w", err)
		}
		d.approvals.SetPolicy(policy)
	}
	var tokens []string
	for _, t := range d.tokens.List() {
		tokens = append(tokens, t.Name)
	}
	logPolicy(d.log, d.approvals.Policy(), reg, tokens)
	h := host.New(reg, host.Options{Audit: d.audit, Locate: d.locate, OnCall: d.onCall, Setup: d.setup, Auth: d.auth,
		Sandbox: d.sandbox, Approvals: d.approvals, InFlight: d.inFlight, Policies: d.policies})
	st := &state{reg: reg, bundles: sum, host: h, mcp: mcp.Handler(h, mcp.Options{Caller: host.Caller{Workspace: d.workspace, User: d.user}, Version: d.cfg.Version, Agent: agentOf})}
	d.cur.Store(st)
	d.metrics.setBundles(sum.Loaded, sum.Refused)
	return nil
}

// logPolicy logs the approval policy in force over the bundles of reg: its file and size, that
// the file does not exist, and each rule that can match no call (a typo in a deny rule protects
// nothing). tokens are the agent tokens' names (nil: not checked).
func logPolicy(log *slog.Logger, p *approval.Policy, reg *registry.Registry, tokens []string) {
	if p.Missing {
		log.Info("approval policy file not found: no rules; each tool's own approval class applies", "file", p.Source)
	} else {
		log.Info("approval policy", "file", p.Source, "rules", len(p.Rules), "policies", len(p.Policies), "elicitation", p.ElicitationAllowed())
	}
	var tools []approval.Request
	for _, b := range reg.Bundles() {
		for _, t := range b.Tools {
			if t.Tool != nil {
				tools = append(tools, approval.Request{Bundle: b.ID(), BundleKey: b.Key(), Tool: t.Tool.ID, ToolPath: strings.Join(t.Path, " ")})
			}
		}
	}
	for _, w := range p.Unmatched(tools, tokens) {
		log.Warn("approval policy rule matches no call", "file", p.Source, "problem", w)
	}
}

// locate names the installed copies of a bundle's binary: the one the store recorded, then the
// daemon's bin directory.
func (d *Engine) locate(b *manifest.Bundle) []string {
	var out []string
	var rec installRecord
	if _, ok, err := d.store.Get(store.BucketInstall, b.Key(), &rec); err == nil && ok && rec.BinPath != "" {
		out = append(out, rec.BinPath)
	}
	return append(out, filepath.Join(install.BinDir(d.stateDir, b.Key()), filepath.Base(b.CLI.Bin)))
}

// loadBundles loads the daemon's bundle sources (registry.DaemonSources) and logs each bundle,
// each missing folder or one without bundles (an empty one is a warning only when nothing else
// serves bundles), and, when nothing is served, "no bundles loaded" with the sources
// searched and what to do.
func loadBundles(log *slog.Logger, c Config) (*registry.Registry, control.BundlesLoaded, error) {
	srcs, warnings, err := registry.DaemonSources(c.Bundles, !c.NoCatalog)
	if err != nil {
		return nil, control.BundlesLoaded{}, err
	}
	reg, err := registry.Load(srcs...)
	if err != nil {
		return nil, control.BundlesLoaded{}, err
	}
	sum := control.BundlesLoaded{Refused: logBundles(log, reg), Loaded: servedCount(reg), Sources: registry.SourceNames(srcs)}
	strays, empty := registry.EmptySources(reg, srcs)
	sum.Warnings = append(warnings, strays...)
	for _, dir := range empty {
		if sum.Loaded == 0 {
			sum.Warnings = append(sum.Warnings, "bundle folder "+dir+" is empty")
		} else {
			log.Info("bundle folder is empty", "folder", dir)
		}
	}
	for _, w := range sum.Warnings {
		log.Warn("bundle folder", "warning", w)
	}
	if sum.Loaded == 0 {
		sources := strings.Join(sum.Sources, ", ")
		if sources == "" {
			sources = "none"
		}
		sum.Warnings = append(sum.Warnings, "no bundles loaded (searched: "+sources+"): clihostd serves nothing")
		log.Warn("no bundles loaded", "sources", sources, "hint", noBundlesHint)
	}
	return reg, sum, nil
}

// servedCount is how many of reg's bundles are served: indexed, without lint errors (a bundle
// with errors stays indexed, for status to name it, but serves nothing).
func servedCount(reg *registry.Registry) int {
	n := 0
	for _, b := range reg.Bundles() {
		if errs, _ := b.Findings.Count(); errs == 0 {
			n++
		}
	}
	return n
}

// noBundlesHint is what to do about a daemon that serves nothing.
const noBundlesHint = "put bundle folders (each with a CLI.md) in a --bundles folder, or drop --no-catalog to serve the built-in catalog; " +
	"then reload (SIGHUP, or systemctl reload clihostd); clihostctl lint FOLDER says why a bundle is refused"

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

// logBundles logs each bundle as loaded or refused (a bundle with lint errors is refused) and
// returns how many were refused.
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
