package manifest

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTemplateToken(t *testing.T) {
	cases := []struct {
		raw    string
		whole  *TemplateExpr
		parts  int
		isLit  bool
		litVal string
	}{
		{raw: "pr", isLit: true, litVal: "pr", parts: 1},
		{raw: "", isLit: true, litVal: "", parts: 0},
		{raw: "${input.title}", whole: &TemplateExpr{Source: "input", Path: []string{"title"}}, parts: 1},
		{raw: "${ input.base | default('main') }", whole: &TemplateExpr{Source: "input", Path: []string{"base"}, Filter: "default", Args: []string{"main"}}, parts: 1},
		{raw: `${input.head | optional("--head", input.head)}`, whole: &TemplateExpr{Source: "input", Path: []string{"head"}, Filter: "optional", Args: []string{"--head"}}, parts: 1},
		{raw: "${input.draft|flag('--draft')}", whole: &TemplateExpr{Source: "input", Path: []string{"draft"}, Filter: "flag", Args: []string{"--draft"}}, parts: 1},
		{raw: "${input.body | json()}", whole: &TemplateExpr{Source: "input", Path: []string{"body"}, Filter: "json"}, parts: 1},
		{raw: "${input.fields | join(',')}", whole: &TemplateExpr{Source: "input", Path: []string{"fields"}, Filter: "join", Args: []string{","}}, parts: 1},
		{raw: "${secrets.GH_TOKEN}", whole: &TemplateExpr{Source: "secrets", Path: []string{"GH_TOKEN"}}, parts: 1},
		{raw: "${input.opts.depth}", whole: &TemplateExpr{Source: "input", Path: []string{"opts", "depth"}}, parts: 1},
		{raw: "--since=${input.since}", parts: 2},
		{raw: "release-${input.version}-${input.arch | default('x64')}", parts: 4},
		{raw: "$${literal}", isLit: true, litVal: "${literal}", parts: 1},
		{raw: "cost: $5", isLit: true, litVal: "cost: $5", parts: 1},
	}
	for _, c := range cases {
		tok, err := ParseTemplateToken(c.raw)
		if err != nil {
			t.Errorf("ParseTemplateToken(%q): %v", c.raw, err)
			continue
		}
		if len(tok.Parts) != c.parts {
			t.Errorf("%q: %d parts, want %d", c.raw, len(tok.Parts), c.parts)
		}
		lit, isLit := tok.Literal()
		if isLit != c.isLit || lit != c.litVal {
			t.Errorf("%q: Literal() = %q %v", c.raw, lit, isLit)
		}
		if c.whole != nil {
			w := tok.Whole()
			if w == nil {
				t.Errorf("%q: not a whole-token expression", c.raw)
				continue
			}
			w.Col = 0
			if !reflect.DeepEqual(w, c.whole) {
				t.Errorf("%q: got %+v, want %+v", c.raw, w, c.whole)
			}
		}
	}
}

func TestParseTemplateTokenErrors(t *testing.T) {
	cases := map[string]string{
		"${input.title":                         "unterminated",
		"${env.HOME}":                           "unknown reference",
		"${input.}":                             "not a valid name",
		"${input.a b}":                          "not a valid name",
		"${input.x | upper()}":                  "unknown filter",
		"${input.x | default}":                  "parentheses",
		"${input.x | default()}":                "one argument",
		"${input.x | default('a', 'b')}":        "one argument",
		"${input.x | json('a')}":                "no arguments",
		"${input.x | optional('title')}":        "option starting with -",
		"${input.x | optional('--x', input.y)}": "same input",
		"${input.x | default(input.x)}":         "quoted string",
		"${input.x | default('a)}":              "unterminated string",
		"--x=${input.x | optional('--x')}":      "whole token",
		"a${input.x | flag('--x')}":             "whole token",
		"${secrets.a.b}":                        "one name",
		"x\x00y":                                "NUL",
		strings.Repeat("a", MaxTemplateSize+1):  "bytes",
	}
	for raw, want := range cases {
		_, err := ParseTemplateToken(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTemplateToken(%.40q) error = %v, want it to mention %q", raw, err, want)
		}
	}
	if _, i, err := ParseArgv([]string{"ok", "${bad"}); err == nil || i != 1 {
		t.Errorf("ParseArgv: index %d, err %v", i, err)
	}
	if _, _, err := ParseArgv(make([]string, MaxArgvTokens+1)); err == nil {
		t.Error("ParseArgv accepted too many entries")
	}
}
