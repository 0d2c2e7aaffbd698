// Package output applies a bundle's output conventions to a finished process: which stream holds
// the result, how to parse it (text, JSON, YAML, binary), what its exit code means, and — for a
// failure — which class of error it is, with retry and fallback guidance (the CLI provider adapter's
// categories).
package output

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
)

// The output formats.
const (
	FormatText   = "text"
	FormatJSON   = "json"
	FormatYAML   = "yaml"
	FormatBinary = "binary"
)

// MaxStderrInError bounds the stderr excerpt carried in an error.
const MaxStderrInError = 4 << 10

// Convention is the effective output convention of one tool: the bundle's output block with the
// tool's runner.output applied.
type Convention struct {
	Format       string         // what to parse: text, json, yaml or binary
	JSONFlag     string         // appended to argv when the tool wants JSON and the CLI's default is not JSON
	JSONFlagArgs []string       // arguments of the JSON flag
	ExitCodes    map[int]string // exit code → name; a code named "ok" is success
	Stream       string         // where the result is: stdout, stderr or mixed
	ErrorStream  string         // where error messages are
	// Empty is the JSON text ("[]", "{}", "null") that an empty json or yaml result stands for;
	// "" makes empty output a parse failure.
	Empty string
	// Auth says the bundle declares auth: only then may a failure's text make it an authentication
	// error (a bundle without auth has nothing to log in to).
	Auth bool
}

// For merges a bundle's output block with a tool's runner.output.
func For(cli *manifest.CLI, tool *manifest.Tool) Convention {
	c := Convention{Format: FormatText, Stream: "stdout", ErrorStream: "stderr", ExitCodes: map[int]string{}, Auth: cli.Auth != nil}
	defaultFormat := FormatText
	if o := cli.Output; o != nil {
		if o.DefaultFormat != "" {
			defaultFormat = o.DefaultFormat
		}
		c.JSONFlag, c.JSONFlagArgs = o.JSONFlag, o.JSONFlagArgs
		addCodes(c.ExitCodes, o.ExitCodes)
		c.Stream = cmp.Or(o.Stream, c.Stream)
		c.ErrorStream = cmp.Or(o.ErrorStream, c.ErrorStream)
		c.Empty = o.Empty
	}
	c.Format = defaultFormat
	if tool != nil && tool.Runner != nil && tool.Runner.Output != nil {
		to := tool.Runner.Output
		c.Format = cmp.Or(to.Format, c.Format)
		if to.JSONFlagArgs != nil {
			c.JSONFlagArgs = to.JSONFlagArgs
		}
		addCodes(c.ExitCodes, to.ExitCodes)
		c.Stream = cmp.Or(to.Stream, c.Stream)
		c.Empty = cmp.Or(to.Empty, c.Empty)
	}
	if c.Format != FormatJSON || defaultFormat == FormatJSON {
		c.JSONFlag, c.JSONFlagArgs = "", nil // the CLI already speaks JSON, or the tool does not want it
	}
	return c
}

func addCodes(dst map[int]string, src map[string]string) {
	for k, v := range src {
		if n, err := strconv.Atoi(k); err == nil {
			dst[n] = v
		}
	}
}

// Args appends the JSON flag and its arguments to argv when the convention asks for it and argv
// does not already carry the flag. They go before a literal "--", where the CLI still reads options.
func (c Convention) Args(argv []string) []string {
	if c.JSONFlag == "" {
		return argv
	}
	for _, a := range argv {
		if a == c.JSONFlag || strings.HasPrefix(a, c.JSONFlag+"=") {
			return argv
		}
		if a == "--" {
			break
		}
	}
	extra := append([]string{c.JSONFlag}, c.JSONFlagArgs...)
	out := make([]string, 0, len(argv)+len(extra))
	for i, a := range argv {
		if a == "--" {
			out = append(out, extra...)
			return append(out, argv[i:]...)
		}
		out = append(out, a)
	}
	return append(out, extra...)
}

// Process is what a finished process produced.
type Process struct {
	ExitCode        int
	Stdout, Stderr  []byte
	StdoutTruncated bool
	StderrTruncated bool
	TimedOut        bool
}

// Failure is a classified error.
type Failure struct {
	Code         errcode.Code // the exit code's name, or timeout, killed, output_parse_failed, upstream_error
	Message      string
	Hint         string
	Stderr       string // an ANSI-stripped excerpt
	Category     string // quota, rate_limit, authentication, validation, network, server, timeout, not_found, configuration, permission, unknown
	Path         string // the path whose access was refused (category permission), as the CLI printed it; "" when none was named
	Retryable    bool
	Fallback     bool
	RetryAfterMS int64
}

// Outcome is a parsed result: Value on success, Failure otherwise.
type Outcome struct {
	OK      bool
	Value   any
	Failure *Failure
}

// Parse interprets a finished process under the convention.
func Parse(c Convention, p Process) Outcome {
	name, mapped := c.ExitCodes[p.ExitCode]
	success := name == "ok" || (p.ExitCode == 0 && !mapped)
	if p.TimedOut {
		return Outcome{Failure: classify(c, p, errcode.Timeout, "the command did not finish in time")}
	}
	if !success {
		code := errcode.Code(name)
		switch {
		case code != "":
		case p.ExitCode == 124:
			code = errcode.Timeout
		case p.ExitCode == 137 || p.ExitCode < 0:
			code = errcode.Killed
		default:
			code = errcode.UpstreamError
		}
		return Outcome{Failure: classify(c, p, code, "")}
	}
	data := stream(c.Stream, p)
	truncated := p.StdoutTruncated && c.Stream != "stderr" || p.StderrTruncated && c.Stream != "stdout"
	empty := !truncated && emptyResult(c.Format, data)
	var v any
	var err error
	if empty && c.Empty != "" {
		v, err = decode(FormatJSON, []byte(c.Empty))
	} else {
		v, err = decode(c.Format, data)
	}
	if err != nil {
		f := &Failure{Code: errcode.OutputParseFailed, Category: "unknown",
			Message: fmt.Sprintf("the command succeeded but its %s output does not parse: %v", c.Format, err),
			Hint:    "the CLI's output is not what the bundle declares; check output.default_format and the tool's runner.output.format"}
		switch {
		case truncated:
			f.Hint = "the output was larger than the capture limit and was cut; narrow the request (filters, limits)"
		case empty:
			f.Hint = `the CLI printed nothing; when that means no results, declare it in the tool's runner.output (empty: "[]" or "{}")`
		}
		return Outcome{Failure: f}
	}
	return Outcome{OK: true, Value: v}
}

// emptyResult reports whether data is a json or yaml result with nothing in it but white space.
func emptyResult(format string, data []byte) bool {
	return (format == FormatJSON || format == FormatYAML) && len(bytes.TrimSpace(data)) == 0
}

func stream(which string, p Process) []byte {
	switch which {
	case "stderr":
		return p.Stderr
	case "mixed":
		return append(append(bytes.Clone(p.Stdout), '\n'), p.Stderr...)
	}
	return p.Stdout
}

// decode parses data in a format. Several JSON values in a row (JSON Lines) become an array.
func decode(format string, data []byte) (any, error) {
	switch format {
	case FormatJSON:
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var vals []any
		for {
			var v any
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		switch len(vals) {
		case 0:
			return nil, errors.New("no JSON value in the output")
		case 1:
			return vals[0], nil
		}
		return vals, nil
	case FormatYAML:
		v, err := decodeYAML(data)
		if err != nil {
			return nil, err
		}
		return jsonCompatible(v), nil
	case FormatBinary:
		return map[string]any{"encoding": "base64", "bytes": len(data), "data": base64.StdEncoding.EncodeToString(data)}, nil
	}
	s := StripANSI(string(data))
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s, nil
}

// jsonCompatible turns YAML's map[string]any / map[any]any values into JSON-encodable ones.
func jsonCompatible(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = jsonCompatible(x)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = jsonCompatible(x)
		}
		return m
	case []any:
		for i, x := range t {
			t[i] = jsonCompatible(x)
		}
	}
	return v
}

// classify builds the failure for a process: message from the error stream, category and retry
// guidance from the message's text.
func classify(c Convention, p Process, code errcode.Code, message string) *Failure {
	errText := strings.TrimSpace(StripANSI(string(stream(c.ErrorStream, p))))
	if errText == "" && c.ErrorStream != "stdout" {
		errText = strings.TrimSpace(StripANSI(string(p.Stdout)))
	}
	if message == "" {
		message = ErrorMessage(errText)
		if message == "" {
			message = fmt.Sprintf("the command exited with code %d", p.ExitCode)
		}
	}
	f := &Failure{Code: code, Message: message, Stderr: excerpt(errText)}
	cl := classifyCall(c, code, errText)
	f.Category, f.Retryable, f.Fallback, f.RetryAfterMS = cl.Category, cl.Retryable, cl.Fallback, cl.RetryAfterMS
	if cl.Category == CategoryPermission {
		f.Path, _ = Refusal(errText)
	}
	f.Hint = hintFor(code, f.Category, f.Path, p.ExitCode)
	return f
}

// classifyCall classifies a tool's failure. A refused access (EACCES, EPERM, EROFS: see Refusal) is
// a permission problem whatever else the text says, unless the process timed out or was killed. A
// bundle without auth is never an authentication failure from its text (only from an exit code
// the bundle names auth_required): the authentication patterns are skipped, and a bare
// "permission denied" is a permission problem.
func classifyCall(c Convention, code errcode.Code, errText string) Class {
	path, refused := Refusal(errText)
	if code == errcode.Timeout || code == errcode.Killed {
		refused = false
	}
	if refused && (path != "" || !c.Auth) {
		return Class{Category: CategoryPermission}
	}
	if c.Auth || code == errcode.AuthRequired {
		return Classify(string(code) + "\n" + errText)
	}
	return classifyText(string(code)+"\n"+errText, CategoryAuthentication)
}

func hintFor(code errcode.Code, category, path string, exit int) string {
	switch {
	case category == CategoryPermission && path != "":
		return fmt.Sprintf("access to %s was refused (permission denied): the bundle's sandbox (fs.read, fs.write, fs.deny) or the file's own permissions do not allow it", path)
	case category == CategoryPermission:
		return "the CLI was refused an operation (permission denied): the bundle's sandbox or the files' own permissions do not allow it"
	case code == errcode.AuthRequired || category == "authentication":
		return "the CLI is not logged in or its credentials expired; log in (clihostctl login) and retry"
	case code == errcode.Timeout:
		return "narrow the request or raise the tool's timeout_ms"
	case code == errcode.UsageError || category == "validation":
		return "the CLI rejected the arguments; check the tool's inputs against its description"
	case category == "rate_limit":
		return "rate limited: wait and retry"
	case category == "network":
		return "a network error: check the host is reachable and listed in the bundle's sandbox egress"
	case category == "not_found":
		return "the CLI reports that something does not exist; check the names in the input"
	}
	return fmt.Sprintf("the CLI failed with exit code %d; its stderr is included", exit)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func excerpt(s string) string {
	if len(s) <= MaxStderrInError {
		return s
	}
	cut := s[len(s)-MaxStderrInError:]
	for !utf8.ValidString(cut) && len(cut) > 0 {
		cut = cut[1:]
	}
	return "…" + cut
}
