package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/clihost/clihost/manifest"
)

// lintWriters renders a lint report in each --format.
var lintWriters = map[string]func(io.Writer, lintReport) error{
	"text":   writeLintText,
	"json":   writeLintJSON,
	"sarif":  writeLintSARIF,
	"github": writeLintGitHub,
	"gitlab": writeLintGitLab,
}

func writeLintText(w io.Writer, r lintReport) error {
	for _, f := range r.Findings {
		if _, err := fmt.Fprintln(w, f.String()); err != nil {
			return err
		}
	}
	return nil
}

func writeLintJSON(w io.Writer, r lintReport) error {
	if r.Findings == nil {
		r.Findings = manifest.Findings{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeLintGitHub prints GitHub Actions workflow commands, which the runner turns into annotations.
func writeLintGitHub(w io.Writer, r lintReport) error {
	for _, f := range r.Findings {
		line, col := max(f.Pos.Line, 1), max(f.Pos.Col, 1)
		if _, err := fmt.Fprintf(w, "::%s file=%s,line=%d,col=%d,title=%s::%s\n", string(f.Severity),
			ghProperty(f.Pos.File), line, col, ghProperty(f.Rule), ghData(messageWithHint(f))); err != nil {
			return err
		}
	}
	return nil
}

// messageWithHint is a finding's message followed by its hint in parentheses. Severities are
// named as GitHub annotations and SARIF levels name them ("error", "warning").
func messageWithHint(f manifest.Finding) string {
	if f.Hint == "" {
		return f.Message
	}
	return f.Message + " (" + f.Hint + ")"
}

func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// SARIF 2.1.0, the subset GitHub code scanning reads.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription sarifMessage `json:"shortDescription"`
	Help             sarifMessage `json:"help"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           sarifRegion   `json:"region"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn"`
}

func writeLintSARIF(w io.Writer, r lintReport) error {
	ruleIndex := map[string]int{}
	var rules []sarifRule
	ids := make([]string, 0)
	hints := map[string]string{}
	for _, f := range r.Findings {
		if _, ok := hints[f.Rule]; !ok {
			ids = append(ids, f.Rule)
			hints[f.Rule] = f.Hint
		}
	}
	sort.Strings(ids)
	for i, id := range ids {
		ruleIndex[id] = i
		rules = append(rules, sarifRule{ID: id, ShortDescription: sarifMessage{Text: id}, Help: sarifMessage{Text: hints[id]}})
	}
	results := []sarifResult{}
	for _, f := range r.Findings {
		results = append(results, sarifResult{
			RuleID: f.Rule, RuleIndex: ruleIndex[f.Rule], Level: string(f.Severity), Message: sarifMessage{Text: messageWithHint(f)},
			Locations: []sarifLocation{{PhysicalLocation: sarifPhysical{
				ArtifactLocation: sarifArtifact{URI: sarifURI(f.Pos.File)},
				Region:           sarifRegion{StartLine: max(f.Pos.Line, 1), StartColumn: max(f.Pos.Col, 1)},
			}}},
		})
	}
	if rules == nil {
		rules = []sarifRule{}
	}
	log := sarifLog{
		Schema:  "https://json.schemastore.org/sarif-2.1.0.json",
		Version: "2.1.0",
		Runs: []sarifRun{{
			Tool:    sarifTool{Driver: sarifDriver{Name: "clihostctl", Version: version, InformationURI: "https://github.com/clihost/clihost", Rules: rules}},
			Results: results,
		}},
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(log)
}

// sarifURI is a finding's file as a SARIF artifact URI: a relative path stays relative (GitHub
// code scanning resolves it against the repository), an absolute one becomes a file:// URI, and
// characters a URI may not hold (spaces, '%', '#', '?') are percent-encoded.
func sarifURI(file string) string {
	p := filepath.ToSlash(file)
	if filepath.IsAbs(file) {
		return (&url.URL{Scheme: "file", Path: p}).String()
	}
	return (&url.URL{Path: p}).String() // "./" before a first segment with ':' (not a scheme)
}

// gitlabIssue is one entry of a GitLab Code Quality report (the Code Climate subset GitLab reads).
type gitlabIssue struct {
	Description string         `json:"description"`
	CheckName   string         `json:"check_name"`
	Fingerprint string         `json:"fingerprint"`
	Severity    string         `json:"severity"`
	Location    gitlabLocation `json:"location"`
}

type gitlabLocation struct {
	Path  string      `json:"path"`
	Lines gitlabLines `json:"lines"`
}

type gitlabLines struct {
	Begin int `json:"begin"`
}

// writeLintGitLab prints a GitLab Code Quality report: a JSON array of issues, errors "major" and
// warnings "minor", each with a fingerprint unique to its rule, file, position and message.
func writeLintGitLab(w io.Writer, r lintReport) error {
	issues := []gitlabIssue{}
	for _, f := range r.Findings {
		line, col := max(f.Pos.Line, 1), max(f.Pos.Col, 1)
		path := filepath.ToSlash(f.Pos.File)
		sum := sha256.Sum256([]byte(strings.Join([]string{f.Rule, path, strconv.Itoa(line), strconv.Itoa(col), f.Message}, "\x00")))
		severity := "minor"
		if f.Severity == manifest.SeverityError {
			severity = "major"
		}
		issues = append(issues, gitlabIssue{Description: messageWithHint(f), CheckName: f.Rule, Fingerprint: hex.EncodeToString(sum[:16]),
			Severity: severity, Location: gitlabLocation{Path: path, Lines: gitlabLines{Begin: line}}})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(issues)
}
