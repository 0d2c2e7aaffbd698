package acli

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/clihost/clihost/internal/editdist"
	"github.com/clihost/clihost/manifest"
)

// Kind says what a parsed command asks for.
type Kind int

// The kinds of request.
const (
	KindCall    Kind = iota // run Request.Tool with Request.Input
	KindHelp                // help for Request.Topic (empty: root help); answer with Help
	KindSchema              // schemas for Request.Topic (empty: every command); answer with Schema
	KindVersion             // answer with Version
)

// Request is a parsed command.
type Request struct {
	Kind Kind
	// Command is the parsed command name, as the audit log's parsed_command (spec §8.3): the tool's
	// command path ("pr list") for KindCall, else the reserved word ("help", "schema", "version").
	Command string
	Tool    *manifest.ToolEntry // KindCall only
	// Input is the tool input built from the options and positionals (KindCall only; never nil).
	// Values are string, bool, json.Number (integer and number), []any and map[string]any.
	Input map[string]any
	Topic []string // KindHelp and KindSchema: the command path asked about (nil: all)
}

// Options adjusts Parse.
type Options struct {
	// Workspace is the absolute workspace directory that `format: path` inputs must stay inside.
	// When empty, only the lexical checks apply (no absolute paths, no escaping with ..).
	Workspace string
}

// The reserved first words (spec §6.1) and the help options.
const (
	wordHelp    = "help"
	wordSchema  = "schema"
	wordVersion = "version"
	optHelp     = "--help"
	optH        = "-h"
)

// Parse tokenizes command and routes it onto bundle b.
//
// The first word selects: help [command…], schema [command…], version (also --help/-h and
// --version as the first word), or a command of b's tree. Reserved words win over a bundle command
// of the same name. The longest run of leading words that walks the commands tree down to a leaf
// selects the tool; the remaining arguments are options and positionals parsed against the tool's
// input schema (see parseInputs). A bare `--help` (or `-h`, unless the tool declares it as an
// x-short) before any "--" asks for that command's help instead, even where it could be read as an
// option's value; a property named help is set with --help=VALUE. `-v` has no special meaning.
//
// A group named without a subcommand ("pr") is a COMMAND_NOT_FOUND listing the group's commands, so
// that a mistake never looks like a success; "pr --help" and "help pr" describe the group. An empty
// command is a PARSE_ERROR pointing at help.
func Parse(b *manifest.Bundle, command string, opts Options) (*Request, *Error) {
	if b == nil || b.CLI == nil {
		return nil, noBundle()
	}
	toks, err := Tokenize(command)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		ex := suggest(b, nil)
		return nil, &Error{Code: ParseError, Message: "Failed to parse command: the command is empty",
			Hint: "Run 'help' to list commands", Examples: append([]string{wordHelp}, ex[:min(2, len(ex))]...)}
	}
	switch toks[0] {
	case wordHelp, optHelp, optH:
		topic, err := resolveTopic(b, toks[1:])
		if err != nil {
			return nil, err
		}
		return &Request{Kind: KindHelp, Command: wordHelp, Topic: topic}, nil
	case wordSchema:
		topic, err := resolveTopic(b, toks[1:])
		if err != nil {
			return nil, err
		}
		return &Request{Kind: KindSchema, Command: wordSchema, Topic: topic}, nil
	case wordVersion, "--version":
		if len(toks) > 1 {
			return nil, &Error{Code: ValidationError, Message: fmt.Sprintf("Invalid argument: %s: version takes no arguments", quoteClip(toks[1])), Hint: "Run 'version'"}
		}
		return &Request{Kind: KindVersion, Command: wordVersion}, nil
	}

	level := b.CLI.Commands
	for i, tok := range toks {
		c := child(level, tok)
		if c == nil {
			if i > 0 && helpAsked(toks[i:], nil) {
				return &Request{Kind: KindHelp, Command: wordHelp, Topic: clone(toks[:i])}, nil
			}
			if i > 0 && strings.HasPrefix(tok, "-") {
				return nil, groupError(b, toks[:i])
			}
			return nil, notFound(b, toks[:i+1])
		}
		if c.Children != nil {
			level = c.Children
			continue
		}
		path := toks[:i+1]
		e := entry(b, path)
		if e == nil {
			return nil, notFound(b, path)
		}
		rest := toks[i+1:]
		if helpAsked(rest, e) {
			return &Request{Kind: KindHelp, Command: wordHelp, Topic: clone(path)}, nil
		}
		input, err := parseInputs(e, rest, opts)
		if err != nil {
			return nil, err
		}
		return &Request{Kind: KindCall, Command: e.CommandPath(), Tool: e, Input: input}, nil
	}
	return nil, groupError(b, toks)
}

// helpAsked reports whether --help or -h appears among args before a "--". For a tool that
// declares -h as an x-short, -h is that option instead.
func helpAsked(args []string, e *manifest.ToolEntry) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case optHelp:
			return true
		case optH:
			if e == nil || shortOption(e, 'h') == "" {
				return true
			}
		}
	}
	return false
}

// child finds the node named name among cs.
func child(cs []*manifest.Command, name string) *manifest.Command {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// entry finds the loaded tool at path, or nil.
func entry(b *manifest.Bundle, path []string) *manifest.ToolEntry {
	for _, t := range b.Tools {
		if t.Tool != nil && slices.Equal(t.Path, path) {
			return t
		}
	}
	return nil
}

func clone(s []string) []string { return append([]string(nil), s...) }

// resolveTopic checks that words name a node of the commands tree (a group or a loaded tool).
func resolveTopic(b *manifest.Bundle, words []string) ([]string, *Error) {
	if len(words) == 0 {
		return nil, nil
	}
	if _, err := lookupNode(b, words); err != nil {
		return nil, err
	}
	return clone(words), nil
}

// lookupNode finds the node at path: a group (returned with its children) or a loaded tool.
func lookupNode(b *manifest.Bundle, path []string) (*manifest.Command, *Error) {
	level := b.CLI.Commands
	var c *manifest.Command
	for i, w := range path {
		if c != nil && c.Children == nil {
			return nil, notFound(b, path[:i+1])
		}
		if c = child(level, w); c == nil {
			return nil, notFound(b, path[:i+1])
		}
		level = c.Children
	}
	if c.Children == nil && entry(b, path) == nil {
		return nil, notFound(b, path)
	}
	return c, nil
}

// notFound is COMMAND_NOT_FOUND for the words typed, with the closest real commands as examples.
func notFound(b *manifest.Bundle, typed []string) *Error {
	name := strings.Join(typed, " ")
	e := &Error{Code: CommandNotFound, Message: fmt.Sprintf("Command %s not found", quoteClip(name)),
		Hint: "Run 'help' to list commands", Examples: suggest(b, typed)}
	if len(typed) > 0 {
		if node := nodeAt(b, typed); node != nil && node.Children == nil {
			e.Message = fmt.Sprintf("Command %s is unavailable: its TOOL.md did not load", quoteClip(name))
			e.Hint = "Run 'help' to list the commands that work; fix the bundle with 'clihostctl lint'"
		} else if len(typed) == 1 && typed[0] == b.CLI.Bin {
			e.Hint = fmt.Sprintf("Leave out the program name %q: commands start with the subcommand. Run 'help' to list commands", b.CLI.Bin)
		}
	}
	return e
}

// nodeAt walks path without checking for a loaded tool; nil when path leaves the tree.
func nodeAt(b *manifest.Bundle, path []string) *manifest.Command {
	level := b.CLI.Commands
	var c *manifest.Command
	for _, w := range path {
		if c = child(level, w); c == nil {
			return nil
		}
		level = c.Children
	}
	return c
}

// groupError is COMMAND_NOT_FOUND for a group named without one of its subcommands.
func groupError(b *manifest.Bundle, path []string) *Error {
	node := nodeAt(b, path)
	var subs []string
	for _, c := range node.Children {
		subs = append(subs, c.Name)
	}
	name := strings.Join(path, " ")
	return &Error{Code: CommandNotFound,
		Message:  fmt.Sprintf("Command '%s' needs a subcommand: %s", name, strings.Join(subs, ", ")),
		Hint:     fmt.Sprintf("Run 'help %s' for details", name),
		Examples: leavesUnder(b, path, 3)}
}

// leavesUnder lists up to n loaded commands under path, in manifest order.
func leavesUnder(b *manifest.Bundle, path []string, n int) []string {
	var out []string
	for _, t := range b.Tools {
		if t.Tool != nil && len(t.Path) > len(path) && slices.Equal(t.Path[:len(path)], path) && len(out) < n {
			out = append(out, t.CommandPath())
		}
	}
	return out
}

// maxSuggestRunes bounds the text compared by edit distance, so a huge word costs little.
const maxSuggestRunes = 64

// suggest returns up to three loaded commands closest to the words typed: commands whose path
// starts with (or is a prefix of) the typed words first, then by edit distance, then in manifest
// order.
func suggest(b *manifest.Bundle, typed []string) []string {
	want := clipForDistance(strings.Join(typed, " "))
	type cand struct {
		path  string
		score int
	}
	var cands []cand
	for _, t := range b.Tools {
		if t.Tool == nil {
			continue
		}
		full := t.CommandPath()
		score := 0
		if want != "" {
			n := min(len(typed), len(t.Path))
			head := clipForDistance(strings.Join(t.Path[:n], " "))
			switch {
			case strings.HasPrefix(full, want) || strings.HasPrefix(want, head+" "):
				score = 0
			default:
				score = 1 + editdist.Distance(want, head)
			}
		}
		cands = append(cands, cand{full, score})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score < cands[j].score })
	out := make([]string, 0, 3)
	for _, c := range cands[:min(3, len(cands))] {
		out = append(out, c.path)
	}
	return out
}

func clipForDistance(s string) string {
	if utf8.RuneCountInString(s) <= maxSuggestRunes {
		return s
	}
	return string([]rune(s)[:maxSuggestRunes])
}

// quoteClip quotes s for a message, cut to 64 characters.
func quoteClip(s string) string { return "'" + clipRunes(s, 64) + "'" }
