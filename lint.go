package clihost

import (
	"context"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

// LintReport is what loading the Host's bundles found (clihostctl lint prints it).
type LintReport struct {
	// Bundles are every bundle loaded, in load order, including those with errors, duplicates and
	// bundles without an id.
	Bundles []Bundle
	// Findings are every bundle's findings and the sources' own (a duplicate id@major), sorted.
	Findings manifest.Findings
	// Errors and Warnings count Findings by severity.
	Errors, Warnings int
}

// Lint reports the findings of every bundle the Host loaded, and what this host cannot honour of
// each bundle's runner (runner-host: no container runtime or image for engine: sandbox;
// runner-needs-missing: needs.native packages not installed). A bundle with errors is never served.
func (h *Host) Lint() LintReport { return lintOf(h.reg) }

// Lint loads the bundles of the options' sources (WithBundleDirs, WithBundleFS, WithDefinitions,
// WithCatalog, WithDefaultBundles; the others are ignored) and reports what it found, without
// making a Host: nothing but the runner's host checks (is a container runtime there, is an image
// present, is a package installed) runs.
func Lint(opts ...Option) (LintReport, error) {
	c, err := configOf(opts)
	if err != nil {
		return LintReport{}, err
	}
	reg, err := c.registry()
	if err != nil {
		return LintReport{}, err
	}
	return lintOf(reg), nil
}

func lintOf(reg *registry.Registry) LintReport {
	var r LintReport
	for _, e := range reg.Entries() {
		r.Bundles = append(r.Bundles, bundleOf(e.Bundle))
	}
	r.Findings = reg.AllFindings()
	h := host.New(reg, host.Options{})
	for _, e := range reg.Entries() {
		r.Findings = append(r.Findings, h.RunnerFindings(context.Background(), e.Bundle)...)
	}
	r.Findings.Sort()
	r.Errors, r.Warnings = r.Findings.Count()
	return r
}
