// Package manifest is clihost's model of a CLI bundle: the CLI.md manifest (AIP-29 agentcli/v1) and
// its TOOL.md siblings (AIP-14 contract plus the AIP-29 binding). It parses both with source positions,
// validates them against the embedded JSON Schemas and applies the semantic rules that a schema cannot
// express, reporting each problem as a Finding with a stable rule id, a position and a hint.
package manifest

import (
	"fmt"
	"sort"
)

// Pos is a position in a source file. Line and Col are 1-based; a zero Line means "the whole file".
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// String renders the position as path:line:col.
func (p Pos) String() string {
	line, col := p.Line, p.Col
	if line < 1 {
		line = 1
	}
	if col < 1 {
		col = 1
	}
	return fmt.Sprintf("%s:%d:%d", p.File, line, col)
}

// Severity ranks a finding.
type Severity string

// The severities a finding can carry.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Finding is one problem found in a manifest.
type Finding struct {
	Pos      Pos      `json:"pos"`
	Severity Severity `json:"severity"`
	Rule     string   `json:"rule"`
	Message  string   `json:"message"`
	Hint     string   `json:"hint,omitempty"`
}

// String renders the finding the way `clihostctl lint` prints it:
// path:line:col: severity: rule-id: message (hint).
func (f Finding) String() string {
	s := fmt.Sprintf("%s: %s: %s: %s", f.Pos, f.Severity, f.Rule, f.Message)
	if f.Hint != "" {
		s += " (" + f.Hint + ")"
	}
	return s
}

// Findings is a list of findings with helpers for the usual questions.
type Findings []Finding

// HasErrors reports whether any finding is an error.
func (fs Findings) HasErrors() bool {
	for _, f := range fs {
		if f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Count returns the number of errors and warnings.
func (fs Findings) Count() (errors, warnings int) {
	for _, f := range fs {
		if f.Severity == SeverityError {
			errors++
		} else {
			warnings++
		}
	}
	return errors, warnings
}

// Sort orders findings by file, line, column and rule, so output is stable.
func (fs Findings) Sort() {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		return a.Rule < b.Rule
	})
}
