package clihost

import "github.com/clihost/clihost/manifest"

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

// Lint reports the findings of every bundle the Host loaded. A bundle with errors is never served.
func (h *Host) Lint() LintReport {
	var r LintReport
	for _, e := range h.reg.Entries() {
		r.Bundles = append(r.Bundles, bundleOf(e.Bundle))
	}
	r.Findings = h.reg.AllFindings()
	r.Errors, r.Warnings = r.Findings.Count()
	return r
}
