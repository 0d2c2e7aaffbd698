// Package cobramcp gives any Cobra program an MCP mode, in-process, as cobra-mcp-bridge.md
// describes: each runnable command becomes one MCP tool (named by its command path joined with _,
// root included: gitx_remote_add), whose input schema holds the command's local and inherited flags
// (pflag types mapped to JSON Schema) and its positionals; a tool call rebuilds the command line and
// executes the command tree in the same process.
//
//	if os.Getenv("MCP_MODE") == "true" {
//		return cobramcp.ServeMCP(root, &cobramcp.Options{ServerInfo: cobramcp.ServerInfo{Name: "myapp", Version: "1.0.0"}})
//	}
//
// The server runs on the official MCP Go SDK (github.com/modelcontextprotocol/go-sdk) over stdio;
// NewServer returns it for other transports, and ServeStdio serves one on stdio.
//
// Output. A call's output is what the command writes to cmd.OutOrStdout() and cmd.OutOrStderr();
// with Options.CaptureProcessOutput (always on with ServeMCP; Linux) it is everything written to
// descriptors 1 and 2 while the command runs — fmt.Println, the log package, processes it starts —
// through pipes drained as it runs (each kept up to MaxOutputBytes). Over stdio the MCP session
// reads and writes duplicates of descriptors 0 and 1 taken at start; 0 then reads /dev/null and 1
// writes to stderr between calls, so a command can neither read the session nor corrupt it. Calls
// that capture run one at a time (descriptors are process-wide). A command that panics is an
// isError result; one that calls os.Exit ends the server.
//
// Positionals come from SetArgSpecs, else the Use string ("<name> [path] files..."), reconciled
// with what the command's Args validator accepts when called with 0 to 10 arguments (the spec's
// option C): "search [query]" with cobra.ExactArgs(1) has a required query.
//
// Metadata. Command annotations give the tool's hints (SetAnnotations, or the keys
// AnnotationReadOnly, AnnotationDestructive, AnnotationIdempotent, AnnotationOpenWorld,
// AnnotationTitle set to "true"/"false") and its output schema (SetOutputSchema). Structured
// content comes from Options.OutputParser, else the format the command declares (SetOutputFormat:
// json, yaml, table) or its --output/--format flag asks for, else a JSON object or array printed
// alone; tables (a header line and whitespace-aligned rows) become arrays of objects (ParseTable),
// and a value that is not an object is {"result": value}. Declared output that does not parse, or
// that its schema refuses, makes the call an error.
//
// Executing on the caller's tree reuses its flag values between calls; the bridge resets every flag
// to its default first (slices through pflag.SliceValue.Replace), but pflag's map flags
// (stringToString, stringToInt) keep the keys of earlier calls. Options.Factory avoids all shared
// state: each call then runs on a new tree, which also captures programs that write to a writer
// fixed when the tree was built. Calls are serialised unless a Factory is given and output is not
// captured.
package cobramcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clihost/clihost/argv/scalar"
	"github.com/clihost/clihost/importer/cobra/usage"
)

// MCPTool is one tool definition.
type MCPTool struct {
	Name         string           `json:"name"`
	Description  string           `json:"description,omitempty"`
	InputSchema  JSONSchema       `json:"inputSchema"`
	OutputSchema *JSONSchema      `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
}

// JSONSchema is a tool's object schema.
type JSONSchema struct {
	Type                 string              `json:"type"`
	Properties           map[string]Property `json:"properties,omitempty"`
	Required             []string            `json:"required,omitempty"`
	Items                *Property           `json:"items,omitempty"`
	AdditionalProperties *Property           `json:"additionalProperties,omitempty"`
}

// Property is the schema of one flag, positional or output value. AdditionalProperties (maps,
// stringToString), Properties and Required (objects in an output schema) are additions to the
// spec's Property.
type Property struct {
	Type                 string              `json:"type"`
	Properties           map[string]Property `json:"properties,omitempty"`
	Required             []string            `json:"required,omitempty"`
	Description          string              `json:"description,omitempty"`
	Default              any                 `json:"default,omitempty"`
	Pattern              string              `json:"pattern,omitempty"`
	Format               string              `json:"format,omitempty"`
	Minimum              *int                `json:"minimum,omitempty"`
	Maximum              *int                `json:"maximum,omitempty"`
	Items                *Property           `json:"items,omitempty"`
	AdditionalProperties *Property           `json:"additionalProperties,omitempty"`
	Examples             []string            `json:"examples,omitempty"`
}

// ArgSpec describes one positional argument. Attach them to a command with SetArgSpecs; without,
// they are read from the Use string (<required>, [optional], name... variadic).
type ArgSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Type        string `json:"type"` // "string" (default), "integer", "number", "boolean"
	Required    bool   `json:"required"`
	Variadic    bool   `json:"variadic"`
}

// Content is one content item of a result.
type Content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MCPResult is a tool call's result.
type MCPResult struct {
	Content           []Content `json:"content"`
	StructuredContent any       `json:"structuredContent,omitempty"`
	IsError           bool      `json:"isError,omitempty"`
}

// MCPError is how an execution error is reported to the client (in a result with isError).
type MCPError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// ServerInfo names the server.
type ServerInfo struct {
	Name    string
	Version string
}

// Logger receives one line per call.
type Logger interface {
	Printf(format string, args ...any)
}

// Options configure the bridge. The zero value (or nil) serves every runnable, non-hidden,
// non-deprecated command except help and completion.
type Options struct {
	ServerInfo ServerInfo
	// CommandFilter says which runnable commands become tools.
	CommandFilter func(*cobra.Command) bool
	// PreExecute may modify the command (e.g. set --output json) before it runs.
	PreExecute func(*cobra.Command) error
	// OutputParser structures the captured stdout; its value becomes structuredContent.
	OutputParser func(string, *cobra.Command) (interface{}, error)
	// ErrorHandler turns an execution error into what the client sees.
	ErrorHandler func(error) *MCPError
	// Logger receives one line per call.
	Logger Logger
	// Factory, when set, builds a new command tree for each call, writing to stdout and stderr
	// (an extension of the spec: no state is shared between calls). Its tree must have the same
	// commands as the root given to ServeMCP.
	Factory func(stdout, stderr io.Writer) *cobra.Command
	// CaptureProcessOutput points descriptors 1 and 2 at pipes of the call while each command
	// runs (Linux), so that what it writes to os.Stdout and os.Stderr directly (fmt.Println, the
	// log package) and the output of processes it starts are the call's output. Descriptors are
	// process-wide: calls then run one at a time, and whatever else the process writes meanwhile
	// is part of the call's output. ServeMCP always sets it (over stdio, such writes would
	// otherwise corrupt the MCP stream).
	CaptureProcessOutput bool
	// MaxOutputBytes bounds what a call keeps of its stdout, and of its stderr (default
	// DefaultMaxOutputBytes); the rest is drained and dropped, and the text says so.
	MaxOutputBytes int
}

const argSpecsAnnotation = "cobramcp.argspecs"

// SetArgSpecs attaches positional argument metadata to a command (kept in cmd.Annotations).
func SetArgSpecs(cmd *cobra.Command, specs []ArgSpec) {
	b, _ := json.Marshal(specs)
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[argSpecsAnnotation] = string(b)
}

// ArgSpecs returns a command's positionals: those set with SetArgSpecs, else those of its Use
// string reconciled with what its Args validator accepts (probed with 0 to 10 arguments: the
// spec's option C), so that "search [query]" with cobra.ExactArgs(1) has a required query, and
// "pick" with cobra.RangeArgs(1, 3) has a required arg1 and optional arg2 and arg3.
func ArgSpecs(cmd *cobra.Command) []ArgSpec {
	if s := cmd.Annotations[argSpecsAnnotation]; s != "" {
		var specs []ArgSpec
		if json.Unmarshal([]byte(s), &specs) == nil {
			return specs
		}
	}
	var specs []ArgSpec
	_, rest, _ := strings.Cut(cmd.Use, " ")
	for _, a := range usage.ParseArgs(rest) {
		specs = append(specs, ArgSpec{Name: a.Name, Type: "string", Required: a.Required, Variadic: a.Variadic,
			Description: fmt.Sprintf("%s argument", a.Name)})
	}
	if min, max, ok := arity(cmd); ok {
		specs = withArity(specs, min, max)
	}
	return specs
}

// ToolName is a command's tool name: its path from the root joined with _.
func ToolName(cmd *cobra.Command) string {
	return strings.ReplaceAll(cmd.CommandPath(), " ", "_")
}

// DefaultFilter is the filter used without Options.CommandFilter: runnable, visible, not deprecated,
// not help or completion.
func DefaultFilter(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Hidden || c.Deprecated != "" || c.Name() == "help" || c.Name() == "completion" || strings.HasPrefix(c.Name(), "__") {
			return false
		}
	}
	return cmd.Runnable()
}

// Commands lists the commands that become tools, depth first.
func Commands(root *cobra.Command, filter func(*cobra.Command) bool) []*cobra.Command {
	if filter == nil {
		filter = DefaultFilter
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && filter(c) {
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// CommandToMCPTool converts one command into its tool definition: local and inherited flags (help
// left out, hidden and deprecated ones too), required flags (MarkFlagRequired), defaults other
// than zero values, and positionals; the hints of its annotations and its output schema
// (SetAnnotations, SetOutputSchema; an output schema whose annotation is not valid JSON is left
// out, and NewServer panics on it).
func CommandToMCPTool(cmd *cobra.Command) MCPTool {
	desc := cmd.CommandPath()
	if cmd.Short != "" {
		desc += ": " + cmd.Short
	}
	if cmd.Long != "" {
		desc += "\n\n" + cmd.Long
	}
	schema, _ := inputSchema(cmd)
	out, _ := outputSchema(cmd)
	return MCPTool{Name: ToolName(cmd), Description: desc, InputSchema: schema, OutputSchema: out, Annotations: Annotations(cmd)}
}

// positional is a positional argument and the name of its property.
type positional struct {
	ArgSpec
	property string
}

// inputSchema is the tool's input schema, with its positionals in order.
func inputSchema(cmd *cobra.Command) (JSONSchema, []positional) {
	schema := JSONSchema{Type: "object", Properties: map[string]Property{}}
	var required []string
	visit := func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" || f.Name == "help" {
			return
		}
		if _, dup := schema.Properties[f.Name]; dup {
			return
		}
		schema.Properties[f.Name] = flagToProperty(f)
		if req, ok := f.Annotations[cobra.BashCompOneRequiredFlag]; ok && len(req) > 0 && req[0] == "true" {
			required = append(required, f.Name)
		}
	}
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	var positionals []positional
	for _, a := range ArgSpecs(cmd) {
		name := argProperty(schema, a.Name)
		p := Property{Type: cmp.Or(a.Type, "string"), Description: a.Description}
		if a.Variadic {
			item := p
			p = Property{Type: "array", Items: &item, Description: a.Description}
		}
		schema.Properties[name] = p
		if a.Required {
			required = append(required, name)
		}
		positionals = append(positionals, positional{a, name})
	}
	sort.Strings(required)
	schema.Required = required
	return schema, positionals
}

// argProperty is a positional's property name: its own unless a flag has it.
func argProperty(s JSONSchema, name string) string {
	if _, taken := s.Properties[name]; taken {
		return name + "_arg"
	}
	return name
}

func intPtr(n int) *int { return &n }

// flagToProperty maps a pflag type to JSON Schema (cobra-mcp-bridge.md's table).
func flagToProperty(f *pflag.Flag) Property {
	p := Property{Type: "string", Description: f.Usage}
	switch t := f.Value.Type(); t {
	case "bool":
		p.Type = "boolean"
	case "int", "int8", "int16", "int32", "int64":
		p.Type = "integer"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		p.Type, p.Minimum = "integer", intPtr(0)
	case "count":
		p.Type, p.Minimum = "integer", intPtr(0)
		p.Description += " (incremental count)"
	case "float32", "float64":
		p.Type = "number"
	case "stringSlice", "stringArray":
		p.Type, p.Items = "array", &Property{Type: "string"}
		if t == "stringSlice" {
			p.Description += " (comma-separated in CLI)"
		}
	case "intSlice", "int32Slice", "int64Slice", "uintSlice":
		p.Type, p.Items = "array", &Property{Type: "integer"}
	case "float32Slice", "float64Slice":
		p.Type, p.Items = "array", &Property{Type: "number"}
	case "boolSlice":
		p.Type, p.Items = "array", &Property{Type: "boolean"}
	case "durationSlice", "ipSlice":
		p.Type, p.Items = "array", &Property{Type: "string"}
	case "stringToString":
		p.Type, p.AdditionalProperties = "object", &Property{Type: "string"}
		p.Description += " (key=value pairs)"
	case "stringToInt", "stringToInt64":
		p.Type, p.AdditionalProperties = "object", &Property{Type: "integer"}
		p.Description += " (key=value pairs)"
	case "duration":
		p.Pattern = usage.DurationPattern
		p.Description += " (e.g., '5m', '30s')"
		p.Examples = []string{"30s", "5m", "1h"}
	case "ip":
		p.Format = "ipv4"
		if strings.Contains(f.DefValue, ":") {
			p.Format = "ipv6"
		}
	case "ipNet":
		p.Pattern = `^[0-9A-Fa-f:.]+/[0-9]{1,3}$`
	case "string", "ipMask", "bytesHex", "bytesBase64":
	default:
		p.Description += fmt.Sprintf(" (type: %s)", t)
	}
	p.Default = defaultValue(f, p)
	return p
}

// defaultValue is the flag's default as JSON, or nil for zero values.
func defaultValue(f *pflag.Flag, p Property) any {
	d := f.DefValue
	switch d {
	case "", "[]", "0", "false", "map[]", "0s", "<nil>":
		return nil
	}
	switch p.Type {
	case "integer":
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			return n
		}
	case "number":
		if n, err := strconv.ParseFloat(d, 64); err == nil {
			return n
		}
	case "boolean":
		return d == "true"
	case "array":
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			return sv.GetSlice()
		}
		return nil
	case "object":
		return nil
	}
	return d
}

// BuildArgs turns a tool call's arguments into the command line after the command path, checking
// them against the tool's schema: unknown names, missing required ones and wrong types are errors.
func BuildArgs(cmd *cobra.Command, arguments map[string]any) ([]string, error) {
	schema, positionals := inputSchema(cmd)
	for _, r := range schema.Required {
		if v, ok := arguments[r]; !ok || v == nil {
			return nil, fmt.Errorf("argument %q is required", r)
		}
	}
	for k := range arguments {
		if _, ok := schema.Properties[k]; !ok {
			return nil, fmt.Errorf("unknown argument %q", k)
		}
	}
	isPositional := map[string]bool{}
	for _, p := range positionals {
		isPositional[p.property] = true
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(arguments)) {
		v := arguments[name]
		if isPositional[name] || v == nil {
			continue
		}
		f := cmd.Flags().Lookup(name)
		if f == nil {
			continue
		}
		args, err := flagArgs(f, v)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", name, err)
		}
		out = append(out, args...)
	}
	var values []string
	for _, p := range positionals {
		v, ok := arguments[p.property]
		if !ok || v == nil {
			continue
		}
		items, isArray := v.([]any)
		if !isArray {
			items = []any{v}
		} else if !p.Variadic {
			return nil, fmt.Errorf("argument %q takes one value", p.property)
		}
		for _, it := range items {
			s, err := scalar.String(it)
			if err != nil {
				return nil, fmt.Errorf("argument %q: %w", p.property, err)
			}
			values = append(values, s)
		}
	}
	if slices.ContainsFunc(values, func(v string) bool { return strings.HasPrefix(v, "-") }) {
		out = append(out, "--") // so that a value like "-x" stays a positional
	}
	return append(out, values...), nil
}

// flagArgs renders one flag: --name for true, --name=false, slices joined with commas, stringArray
// repeated, maps as --name=k=v,k2=v2 (keys sorted), anything else --name=value.
func flagArgs(f *pflag.Flag, v any) ([]string, error) {
	name := "--" + f.Name
	switch t := f.Value.Type(); {
	case t == "bool":
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want a boolean, got %T", v)
		}
		if b {
			return []string{name}, nil
		}
		return []string{name + "=false"}, nil
	case t == "stringArray", strings.HasSuffix(t, "Slice"):
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("want an array, got %T", v)
		}
		parts := make([]string, 0, len(items))
		for _, it := range items {
			s, err := scalar.String(it)
			if err != nil {
				return nil, err
			}
			parts = append(parts, s)
		}
		if t == "stringArray" {
			out := make([]string, len(parts))
			for i, s := range parts {
				out[i] = name + "=" + s
			}
			return out, nil
		}
		return []string{name + "=" + strings.Join(parts, ",")}, nil
	case strings.HasPrefix(t, "stringTo"):
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("want an object, got %T", v)
		}
		parts := make([]string, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			s, err := scalar.String(m[k])
			if err != nil {
				return nil, err
			}
			parts = append(parts, k+"="+s)
		}
		return []string{name + "=" + strings.Join(parts, ",")}, nil
	}
	switch v.(type) {
	case []any, map[string]any:
		return nil, fmt.Errorf("want a single value, got %T", v)
	}
	s, err := scalar.String(v)
	if err != nil {
		return nil, err
	}
	return []string{name + "=" + s}, nil
}

// ErrToolNotFound is returned for a tool name no command has.
var ErrToolNotFound = errors.New("tool not found")

// bridge executes tools on one tree.
type bridge struct {
	root *cobra.Command
	opts Options
	mu   sync.Mutex
}

func findCommand(root *cobra.Command, filter func(*cobra.Command) bool, name string) *cobra.Command {
	for _, c := range Commands(root, filter) {
		if ToolName(c) == name {
			return c
		}
	}
	return nil
}

// ExecuteMCPTool executes the tool toolName of rootCmd's tree with args, with default options.
func ExecuteMCPTool(rootCmd *cobra.Command, toolName string, args map[string]interface{}) (*MCPResult, error) {
	b := &bridge{root: rootCmd}
	return b.execute(context.Background(), toolName, args)
}

// ErrPanicked is what the error of a call whose command panicked wraps.
var ErrPanicked = errors.New("command panicked")

// panicError is a command's panic: its value goes to the client, its stack only to the Logger.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("%v: %v", ErrPanicked, e.value) }
func (e *panicError) Unwrap() error { return ErrPanicked }

// execute runs one call: a protocol-level error (unknown tool) is returned as error; bad
// arguments and failed commands are results with IsError.
func (b *bridge) execute(ctx context.Context, toolName string, args map[string]any) (*MCPResult, error) {
	cmd := findCommand(b.root, b.opts.CommandFilter, toolName)
	if cmd == nil {
		return nil, fmt.Errorf("%w: %s", ErrToolNotFound, toolName)
	}
	cliArgs, err := BuildArgs(cmd, args)
	if err != nil {
		return b.failure(err, "", ""), nil
	}
	path := strings.Fields(cmd.CommandPath())[1:]
	full := append(append([]string(nil), path...), cliArgs...)
	target, stdout, stderr, runErr := b.run(ctx, path, full)
	if errors.Is(runErr, ErrToolNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrToolNotFound, toolName)
	}
	if b.opts.Logger != nil {
		b.opts.Logger.Printf("cobramcp: %s %q: err=%v, %d bytes of output", toolName, full, runErr, len(stdout))
		if p := (*panicError)(nil); errors.As(runErr, &p) {
			b.opts.Logger.Printf("cobramcp: %s panicked: %v\n%s", toolName, p.value, p.stack)
		}
	}
	if runErr != nil {
		return b.failure(runErr, stdout, stderr), nil
	}
	return b.result(target, stdout, stderr), nil
}

// run executes the command line full (path is the command's path in it) and returns the command
// and what it wrote. With CaptureProcessOutput, descriptors 1 and 2 are the call's pipes while it
// runs, under the process-wide lock; else the command's writers are the call's buffers.
func (b *bridge) run(ctx context.Context, path, full []string) (*cobra.Command, string, string, error) {
	max := cmp.Or(b.opts.MaxOutputBytes, DefaultMaxOutputBytes)
	outBuf, errBuf := &capped{max: max}, &capped{max: max}
	var stdout, stderr io.Writer = outBuf, errBuf
	var capture *fdCapture
	if b.captures() {
		if err := lockStdio(ctx); err != nil {
			return nil, "", "", err
		}
		defer unlockStdio()
		var err error
		if capture, err = startCapture(outBuf, errBuf); err != nil {
			return nil, "", "", fmt.Errorf("capture output: %w", err)
		}
		stdout, stderr = os.Stdout, os.Stderr
	}
	if b.opts.Factory == nil {
		b.mu.Lock()
		defer b.mu.Unlock()
	}
	target, err := b.invoke(ctx, path, full, stdout, stderr)
	if capture != nil {
		if cerr := capture.finish(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("capture output: %w", cerr))
		}
	}
	return target, outBuf.String(), errBuf.String(), err
}

// captures says whether calls capture descriptors 1 and 2.
func (b *bridge) captures() bool { return b.opts.CaptureProcessOutput && captureFDs }

// invoke executes the command line on the tree (a new one from Factory, else the shared one with
// its flags reset); a panic of the command is returned as an error wrapping ErrPanicked.
func (b *bridge) invoke(ctx context.Context, path, full []string, stdout, stderr io.Writer) (target *cobra.Command, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	root := b.root
	if b.opts.Factory != nil {
		root = b.opts.Factory(stdout, stderr)
	} else {
		resetFlags(root)
	}
	target, _, err = root.Find(path)
	if err != nil || target == nil {
		return nil, ErrToolNotFound
	}
	if b.opts.PreExecute != nil {
		if err := b.opts.PreExecute(target); err != nil {
			return target, fmt.Errorf("pre-execute: %w", err)
		}
	}
	root.SetArgs(full)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(strings.NewReader(""))
	root.SilenceUsage, root.SilenceErrors = true, true
	return target, root.ExecuteContext(ctx)
}

// failure is an error result: ErrorHandler's message, else the error with the command's stderr.
func (b *bridge) failure(err error, stdout, stderr string) *MCPResult {
	e := &MCPError{Code: -1, Message: err.Error()}
	if b.opts.ErrorHandler != nil {
		if h := b.opts.ErrorHandler(err); h != nil {
			e = h
		}
	}
	text := e.Message
	if s := strings.TrimSpace(stderr); s != "" && b.opts.ErrorHandler == nil {
		text += "\n" + s
	}
	if s := strings.TrimSpace(stdout); s != "" && b.opts.ErrorHandler == nil {
		text += "\n" + s
	}
	return &MCPResult{IsError: true, Content: []Content{{Type: "text", Text: text}}}
}

// resetFlags puts every flag of the tree back to its default before a call on a shared tree.
func resetFlags(root *cobra.Command) {
	var walk func(*cobra.Command)
	reset := func(f *pflag.Flag) {
		if !f.Changed {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			var def []string
			if d := strings.Trim(f.DefValue, "[]"); d != "" {
				def = strings.Split(d, ",")
			}
			_ = sv.Replace(def)
		} else if !strings.HasPrefix(f.Value.Type(), "stringTo") {
			_ = f.Value.Set(f.DefValue)
		}
		f.Changed = false
	}
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(reset)
		c.PersistentFlags().VisitAll(reset)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// NewServer builds the MCP server of rootCmd's tree (tools only), for any transport.
func NewServer(rootCmd *cobra.Command, opts *Options) *sdk.Server {
	b := &bridge{root: rootCmd}
	if opts != nil {
		b.opts = *opts
	}
	name := cmp.Or(b.opts.ServerInfo.Name, rootCmd.Name())
	version := cmp.Or(b.opts.ServerInfo.Version, rootCmd.Version, "0.0.0")
	s := sdk.NewServer(&sdk.Implementation{Name: name, Version: version},
		&sdk.ServerOptions{Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}})
	for _, c := range Commands(rootCmd, b.opts.CommandFilter) {
		s.AddTool(sdkTool(c), b.handler(ToolName(c)))
	}
	return s
}

// sdkTool is c's tool for the SDK; it panics, as the SDK's AddTool does on a bad tool, when c's
// output schema annotation is not a schema: a programming error to see when the server starts.
func sdkTool(c *cobra.Command) *sdk.Tool {
	t := CommandToMCPTool(c)
	tool := &sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	if _, err := resolvedOutputSchema(c); err != nil {
		panic(fmt.Errorf("cobramcp: %w", err))
	}
	if t.OutputSchema != nil {
		tool.OutputSchema = t.OutputSchema
	}
	if a := t.Annotations; a != nil {
		tool.Annotations = &sdk.ToolAnnotations{Title: a.Title, DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint,
			ReadOnlyHint: a.ReadOnlyHint != nil && *a.ReadOnlyHint, IdempotentHint: a.IdempotentHint != nil && *a.IdempotentHint}
		tool.Title = a.Title
	}
	return tool
}

func (b *bridge) handler(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := map[string]any{}
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&args); err != nil {
				return nil, fmt.Errorf("arguments: %w", err)
			}
		}
		res, err := b.execute(ctx, name, args)
		if err != nil {
			return nil, err
		}
		out := &sdk.CallToolResult{IsError: res.IsError, StructuredContent: res.StructuredContent}
		for _, c := range res.Content {
			out.Content = append(out.Content, &sdk.TextContent{Text: c.Text})
		}
		return out, nil
	}
}

// ServeMCP serves rootCmd's tree over MCP on stdin and stdout until the client disconnects, with
// Options.CaptureProcessOutput set and the MCP stream kept apart from the commands' descriptors
// (ServeStdio).
func ServeMCP(rootCmd *cobra.Command, opts *Options) error {
	return ServeMCPContext(context.Background(), rootCmd, opts)
}

// ServeMCPContext is ServeMCP with a context that stops the server.
func ServeMCPContext(ctx context.Context, rootCmd *cobra.Command, opts *Options) error {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.CaptureProcessOutput = true
	return ServeStdio(ctx, NewServer(rootCmd, &o))
}
