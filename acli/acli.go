// Package acli implements ACLI mode (the Agent CLI spec, "ACLI", version
// SpecVersion): one MCP tool, "cli", that takes a single command string such as
// `pr list --state open --limit 10` and routes it onto a bundle's TOOL.md inputs.
//
// The pipeline is Tokenize (shell-less, POSIX-like splitting with hard limits), routing over the
// bundle's commands tree (the reserved words help, schema and version come first), and option
// parsing driven by the tool's input JSON Schema. Parse returns a Request; the MCP layer validates
// and runs KindCall requests and answers the others with Help, Schema and Version. Responses use
// the spec's envelope (Success, Failure) and error codes (§5.2).
//
// Nothing here runs a shell or any process: every character of the command is literal text.
package acli

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clihost/clihost/manifest"
)

// SpecVersion is the ACLI spec version this package implements.
const SpecVersion = "0.1.0"

// ToolName is the name of the single MCP tool ACLI mode exposes (spec §3.1).
const ToolName = "cli"

// Limits on a command (spec §4.2.2). Lengths count Unicode code points (runes), not bytes and not
// UTF-16 code units: "🚀" is one character here and two in the JavaScript reference. Every argument
// is made of characters of the command, so MaxCommandLength also bounds every argument and
// MaxArgLength can never be the limit that is hit first; it is kept as the spec's third limit.
const (
	MaxCommandLength = 10000
	MaxArgs          = 100
	MaxArgLength     = 10000
)

// Error codes (spec §5.2).
const (
	ParseError           = "PARSE_ERROR"
	CommandNotFound      = "COMMAND_NOT_FOUND"
	PermissionDenied     = "PERMISSION_DENIED"
	ValidationError      = "VALIDATION_ERROR"
	ExecutionError       = "EXECUTION_ERROR"
	Timeout              = "TIMEOUT"
	RateLimited          = "RATE_LIMITED"
	PathTraversalBlocked = "PATH_TRAVERSAL_BLOCKED"
)

// Error is the error object of a failed response (spec §5.1.2).
type Error struct {
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	Hint     string   `json:"hint,omitempty"`
	Examples []string `json:"examples,omitempty"`
}

// Error implements the error interface: "CODE: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Meta is the _meta object of a response: the command as received and, on success, how long it took.
type Meta struct {
	Command    string `json:"command"`
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

// Response is the AcliResponse envelope (spec §5.1): Success with Data (and an optional Message),
// or not Success with Error. Data is omitted from JSON only when it is nil.
type Response struct {
	Success bool   `json:"success"`
	Data    any    `json:"data,omitempty"`
	Message string `json:"message,omitempty"`
	Error   *Error `json:"error,omitempty"`
	Meta    *Meta  `json:"_meta,omitempty"`
}

// Success builds a successful response for command with data, an optional message and the
// execution time (rounded down to whole milliseconds).
func Success(command string, data any, message string, duration time.Duration) Response {
	ms := duration.Milliseconds()
	return Response{Success: true, Data: data, Message: message, Meta: &Meta{Command: metaCommand(command), DurationMS: &ms}}
}

// Failure builds an error response for command. A nil e becomes a generic EXECUTION_ERROR so the
// envelope is always well-formed.
func Failure(command string, e *Error) Response {
	if e == nil {
		e = &Error{Code: ExecutionError, Message: "Execution failed: unknown error", Hint: "Check input and retry"}
	}
	return Response{Error: e, Meta: &Meta{Command: metaCommand(command)}}
}

// metaCommand is the command echoed in _meta: made valid UTF-8 and cut at MaxCommandLength
// characters (with "…" appended), so an oversized command is not sent back whole.
func metaCommand(command string) string {
	command = strings.ToValidUTF8(command, "\uFFFD")
	if len(command) <= MaxCommandLength || utf8.RuneCountInString(command) <= MaxCommandLength {
		return command
	}
	return clipRunes(command, MaxCommandLength)
}

// clipRunes cuts s after n characters, marking the cut with "…".
func clipRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos] + "…"
		}
		i++
	}
	return s
}

// ToolDescription is the description of the "cli" tool for bundle b (spec §3.1, in the reference
// implementation's wording): the bundle's description, its top-level commands and a pointer to help.
func ToolDescription(b *manifest.Bundle) string {
	desc := "Execute CLI command."
	if b != nil && b.CLI != nil {
		if d := strings.TrimSpace(b.CLI.Description); d != "" {
			desc = d
		}
	}
	names := topLevelNames(b)
	if len(names) == 0 {
		return desc + " Run 'help' for details."
	}
	return desc + " Commands: " + strings.Join(names, ", ") + ". Run 'help' for details."
}

// InputSchema is the input schema of bundle b's "cli" tool (spec §3.1), closed to other
// properties. The command's description gives an example of b's own (CommandExample).
func InputSchema(b *manifest.Bundle) map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"command": map[string]any{
				"type":        "string",
				"description": "CLI command string (e.g., '" + CommandExample(b) + "'). Run 'help' for available commands.",
			},
		},
		"required":             []any{"command"},
		"additionalProperties": false,
	}
}

// CommandExample is a command of bundle b to show as an example: the first TOOL.md example, in
// the tools' order, that can be written as an ACLI command; else the first tool's command path;
// else "help".
func CommandExample(b *manifest.Bundle) string {
	if b == nil {
		return wordHelp
	}
	for _, t := range b.Tools {
		if t.Tool == nil {
			continue
		}
		if ex := toolExamples(t, 1); len(ex) > 0 {
			return ex[0]
		}
	}
	for _, t := range b.Tools {
		if t.Tool != nil {
			return t.CommandPath()
		}
	}
	return wordHelp
}

// topLevelNames lists the first level of b's commands tree, in manifest order.
func topLevelNames(b *manifest.Bundle) []string {
	if b == nil || b.CLI == nil {
		return nil
	}
	names := make([]string, 0, len(b.CLI.Commands))
	for _, c := range b.CLI.Commands {
		names = append(names, c.Name)
	}
	return names
}
