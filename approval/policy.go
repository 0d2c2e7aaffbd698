// Package approval enforces a tool's approval class (AIP-14 `approval`: auto, always, on-mutate,
// policy:<ref>) for every front end: it decides whether a call may run, asks for an approval
// when one is needed, and checks the answer it gets back against the exact call it was asked for.
//
// Three things can approve a call that needs it: a rule of the operator's policy file (allow),
// an operator's `clihostctl approve ID` of the pending call, or the person behind an MCP client
// answering an elicitation. An answer is bound to the bundle, tool, arguments, caller and front
// end it was asked for, carries a deadline, and is used once.
package approval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/clihost/clihost/internal/config"
)

// Decision is what a policy says about a call.
type Decision string

// The decisions.
const (
	Allow Decision = "allow" // run without asking
	Ask   Decision = "ask"   // run only once approved (elicitation or clihostctl approve)
	Deny  Decision = "deny"  // never run
)

// Front ends a rule may name (Rule.Via; Request.Via).
const (
	ViaMCP     = "mcp"     // the daemon's MCP HTTP endpoints (bearer token)
	ViaStdio   = "stdio"   // clihostctl mcp, one agent on stdin/stdout
	ViaControl = "control" // clihostctl call, through the daemon's control socket
	ViaCLI     = "cli"     // clihostctl call without a daemon (in-process)
)

// Policy is the operator's approval policy: the file clihostd --approvals names (docs/operations.md,
// "Approvals"). The zero value has no rules: every tool gets what its class asks for.
type Policy struct {
	// Rules are tried in order; the first that matches a call decides it.
	Rules []Rule `yaml:"rules"`
	// Policies say what the tools whose approval is policy:<ref> get, by ref. A ref not named
	// here is asked for (fail closed).
	Policies map[string]Decision `yaml:"policies"`
	// Elicitation, when false, never asks MCP clients: a call that needs an approval waits for
	// clihostctl approve. Default true.
	Elicitation *bool `yaml:"elicitation"`
	// Source is the policy file named (it may not exist: no rules); "" for none.
	// Missing says the file named did not exist.
	Missing bool   `yaml:"-"`
	Source  string `yaml:"-"`
}

// Rule matches calls and decides them.
type Rule struct {
	// Bundle is a bundle id (gh), id@major (gh@2) or a glob ("*"). Required.
	Bundle string `yaml:"bundle"`
	// Tool is a TOOL.md id, command path ("pr merge"), dotted path or MCP name (pr_merge), a glob
	// (path.Match: "pr-*"); empty matches every tool.
	Tool string `yaml:"tool"`
	// Via lists the front ends the rule applies to (mcp, stdio, control, cli); empty: all.
	Via []string `yaml:"via"`
	// User is the caller's user name (a control-socket caller, or the user MCP calls run for);
	// empty: any.
	User string `yaml:"user"`
	// Token is the name of the agent token an MCP call over the daemon's HTTP carried
	// (clihostctl token create NAME; "default" for the first one); empty: any caller.
	Token string `yaml:"token"`
	// Decision is allow, ask or deny.
	Decision Decision `yaml:"decision"`
}

// ElicitationAllowed reports whether MCP clients may be asked.
func (p *Policy) ElicitationAllowed() bool {
	return p == nil || p.Elicitation == nil || *p.Elicitation
}

// LoadPolicy reads a policy file. A file that does not exist is an empty policy; one that cannot be
// read or does not parse is an error (the caller refuses to start rather than run without it).
func LoadPolicy(file string) (*Policy, error) {
	if file == "" {
		return &Policy{}, nil
	}
	data, err := config.ReadTrusted(file, policyFile)
	if errors.Is(err, os.ErrNotExist) {
		return &Policy{Source: file, Missing: true}, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("approval policy %s: %w", file, err)
	}
	p.Source = file
	return p, nil
}

// policyFile is what LoadPolicy reads: a file, and folders on its way, that only root or
// clihostd's own user may change (config.ReadTrusted).
var policyFile = config.Kind{What: "approval policy", Why: "whoever may change it approves every call"}

// DefaultPolicyFile is where clihostd looks for its approval policy without --approvals:
// /etc/clihost/approvals.yaml for root, else $XDG_CONFIG_HOME/clihost/approvals.yaml
// (~/.config/clihost/approvals.yaml).
func DefaultPolicyFile() string {
	if os.Geteuid() == 0 {
		return "/etc/clihost/approvals.yaml"
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "/etc/clihost/approvals.yaml"
	}
	return filepath.Join(dir, "clihost", "approvals.yaml")
}

// ParsePolicy parses a policy document: unknown keys, anchors and aliases, and invalid values are
// errors.
func ParsePolicy(data []byte) (*Policy, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	if hasAlias(&root) {
		return nil, errors.New("anchors and aliases (&x, *x) are not allowed; write each rule out")
	}
	p := &Policy{}
	if root.Kind == 0 {
		return p, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(p); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document (---): write one policy; the rules after the first would be ignored")
	}
	return p, p.validate()
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return true
	}
	return slices.ContainsFunc(n.Content, hasAlias)
}

func (p *Policy) validate() error {
	for i, r := range p.Rules {
		where := fmt.Sprintf("rule %d", i+1) // counted from 1, as the daemon's messages and the audit count them
		if r.Bundle == "" {
			return fmt.Errorf("%s: bundle is required (a bundle id, or \"*\")", where)
		}
		if r.Decision == "" {
			return fmt.Errorf("%s: decision is required: allow, ask or deny", where)
		}
		if !validDecision(r.Decision) {
			return fmt.Errorf("%s: decision %q: want allow, ask or deny", where, r.Decision)
		}
		for _, pat := range []string{r.Bundle, r.Tool} {
			if _, err := path.Match(pat, ""); err != nil {
				return fmt.Errorf("%s: pattern %q: %w", where, pat, err)
			}
		}
		for _, v := range r.Via {
			if !slices.Contains([]string{ViaMCP, ViaStdio, ViaControl, ViaCLI}, v) {
				return fmt.Errorf("%s: via %q: want mcp, stdio, control or cli", where, v)
			}
		}
	}
	for ref, d := range p.Policies {
		if !validDecision(d) {
			return fmt.Errorf("policies.%s: %q: want allow, ask or deny", ref, d)
		}
	}
	return nil
}

func validDecision(d Decision) bool { return d == Allow || d == Ask || d == Deny }

// match returns the first rule matching req, and its index.
func (p *Policy) match(req *Request) (Rule, int, bool) {
	if p == nil {
		return Rule{}, -1, false
	}
	for i, r := range p.Rules {
		if !glob(r.Bundle, req.Bundle) && !glob(r.Bundle, req.BundleKey) {
			continue
		}
		if r.Tool != "" && !slices.ContainsFunc(toolNames(req), func(n string) bool { return glob(r.Tool, n) }) {
			continue
		}
		if len(r.Via) > 0 && !slices.Contains(r.Via, req.Via) {
			continue
		}
		if r.User != "" && r.User != req.User {
			continue
		}
		if r.Token != "" && r.Token != req.Agent {
			continue
		}
		return r, i, true
	}
	return Rule{}, -1, false
}

// toolNames are the names a call may give req's tool: its TOOL.md id, command path ("pr merge"),
// dotted path (pr.merge) and MCP name (pr_merge). A rule naming any of them matches.
func toolNames(req *Request) []string {
	return []string{req.Tool, req.ToolPath, strings.ReplaceAll(req.ToolPath, " ", "."), strings.ReplaceAll(req.ToolPath, " ", "_")}
}

func glob(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

// Class is what a tool's approval field asks for, resolved against the policy's refs.
type Class struct {
	Name   string   // auto, always, on-mutate, policy:<ref>
	Needed Decision // Allow (no approval needed), Ask or Deny
	Reason string   // why, for messages
}

// ClassOf resolves a tool's approval class: always asks; on-mutate asks when the tool mutates
// something; policy:<ref> is what the policy's policies.<ref> says, Ask when it says nothing;
// auto (or empty) needs nothing. An unknown class asks (lint refuses it; fail closed).
func (p *Policy) ClassOf(approval string, mutates []string) Class {
	switch {
	case approval == "" || approval == "auto":
		return Class{Name: "auto", Needed: Allow}
	case approval == "always":
		return Class{Name: approval, Needed: Ask, Reason: "the tool's approval is always"}
	case approval == "on-mutate":
		if len(mutates) == 0 {
			return Class{Name: approval, Needed: Allow}
		}
		return Class{Name: approval, Needed: Ask, Reason: "the tool changes " + strings.Join(mutates, ", ")}
	case strings.HasPrefix(approval, "policy:"):
		ref := strings.TrimPrefix(approval, "policy:")
		if p != nil {
			if d, ok := p.Policies[ref]; ok {
				return Class{Name: approval, Needed: d, Reason: fmt.Sprintf("the approval policy %q says %s", ref, d)}
			}
		}
		return Class{Name: approval, Needed: Ask, Reason: fmt.Sprintf("the tool defers to the approval policy %q, which the operator's policy file does not define", ref)}
	default:
		return Class{Name: approval, Needed: Ask, Reason: fmt.Sprintf("unknown approval class %q", approval)}
	}
}

// Unmatched names the rules that can match no call: a bundle or tool pattern that matches none of
// tools (the loaded tools, as Requests with Bundle, BundleKey, Tool and ToolPath set), or a token
// not in tokens (nil: not checked). Such a rule is almost always a typo — and a deny rule with a
// typo protects nothing — so the daemon warns at start, on each reload and in -check.
func (p *Policy) Unmatched(tools []Request, tokens []string) []string {
	if p == nil {
		return nil
	}
	var out []string
	for i, r := range p.Rules {
		where := fmt.Sprintf("rule %d (%s)", i+1, r.describe())
		bundleSeen, toolSeen := false, false
		for j := range tools {
			t := &tools[j]
			if !glob(r.Bundle, t.Bundle) && !glob(r.Bundle, t.BundleKey) {
				continue
			}
			bundleSeen = true
			if r.Tool == "" || slices.ContainsFunc(toolNames(t), func(n string) bool { return glob(r.Tool, n) }) {
				toolSeen = true
				break
			}
		}
		switch {
		case !bundleSeen:
			out = append(out, fmt.Sprintf("%s: bundle %q matches no loaded bundle", where, r.Bundle))
		case !toolSeen:
			out = append(out, fmt.Sprintf("%s: tool %q matches no tool of bundle %q (name a TOOL.md id, command path, dotted path or MCP name)", where, r.Tool, r.Bundle))
		}
		if r.Token != "" && tokens != nil && !slices.Contains(tokens, r.Token) {
			out = append(out, fmt.Sprintf("%s: token %q is not an agent token of this daemon (clihostctl token list)", where, r.Token))
		}
	}
	return out
}

// describe is a rule as the operator wrote it, for messages.
func (r Rule) describe() string {
	s := "bundle " + r.Bundle
	if r.Tool != "" {
		s += ", tool " + r.Tool
	}
	if r.Token != "" {
		s += ", token " + r.Token
	}
	return s + ", " + string(r.Decision)
}
