package manifest

import (
	"fmt"
	"strings"
)

// Tool is the frontmatter of a TOOL.md: the AIP-14 contract plus the AIP-29 binding (Runner and a
// narrowing Sandbox).
type Tool struct {
	Schema                string         `yaml:"schema,omitempty" json:"schema,omitempty"`
	Name                  string         `yaml:"name" json:"name"`
	ID                    string         `yaml:"id" json:"id"`
	Description           string         `yaml:"description" json:"description"`
	Version               string         `yaml:"version" json:"version"`
	Inputs                map[string]any `yaml:"-" json:"inputs"`
	Outputs               map[string]any `yaml:"-" json:"outputs"`
	Idempotent            bool           `yaml:"idempotent" json:"idempotent,omitempty"`
	Mutates               []string       `yaml:"mutates,omitempty" json:"mutates,omitempty"`
	Requires              *ToolRequires  `yaml:"requires,omitempty" json:"requires,omitempty"`
	Approval              string         `yaml:"approval,omitempty" json:"approval,omitempty"`
	RiskLevel             int            `yaml:"risk_level" json:"risk_level"`
	CostClass             string         `yaml:"cost_class,omitempty" json:"cost_class,omitempty"`
	TimeoutMS             int            `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
	Retry                 *Retry         `yaml:"retry,omitempty" json:"retry,omitempty"`
	DefaultImplementation *string        `yaml:"default_implementation,omitempty" json:"default_implementation,omitempty"`
	DriverConstraints     map[string]any `yaml:"driver_constraints,omitempty" json:"driver_constraints,omitempty"`
	Implements            string         `yaml:"implements,omitempty" json:"implements,omitempty"`
	Tags                  []string       `yaml:"tags,omitempty" json:"tags,omitempty"`
	Examples              []ToolExample  `yaml:"examples,omitempty" json:"examples,omitempty"`
	Metadata              map[string]any `yaml:"metadata,omitempty" json:"metadata,omitempty"`
	Runner                *ToolRunner    `yaml:"runner,omitempty" json:"runner,omitempty"`
	Sandbox               *Sandbox       `yaml:"sandbox,omitempty" json:"sandbox,omitempty"`
}

// ToolRequires lists a tool's capability requirements (AIP-7).
type ToolRequires struct {
	Network []string `yaml:"network,omitempty" json:"network,omitempty"`
	Secrets []string `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	Tools   []string `yaml:"tools,omitempty" json:"tools,omitempty"`
}

// Retry is a tool's baseline retry policy.
type Retry struct {
	MaxAttempts int    `yaml:"max_attempts" json:"max_attempts"`
	Backoff     string `yaml:"backoff" json:"backoff"`
	InitialMS   int    `yaml:"initial_ms,omitempty" json:"initial_ms,omitempty"`
}

// ToolExample is a provider-agnostic example call.
type ToolExample struct {
	Name   string `yaml:"name" json:"name"`
	Input  any    `yaml:"-" json:"input"`
	Output any    `yaml:"-" json:"output,omitempty"`
	Note   string `yaml:"note,omitempty" json:"note,omitempty"`
}

// ToolRunner binds a TOOL.md to its bundle: the path back to CLI.md and either one argv template
// or, as a clihost extension, a list of steps (each one process). Stdin, another extension, is a
// template for the standard input of an argv tool's process.
type ToolRunner struct {
	CLI    string      `yaml:"cli" json:"cli"`
	Argv   []string    `yaml:"argv,omitempty" json:"argv,omitempty"`
	Steps  []ToolStep  `yaml:"steps,omitempty" json:"steps,omitempty"`
	Stdin  *string     `yaml:"stdin,omitempty" json:"stdin,omitempty"`
	Output *ToolOutput `yaml:"output,omitempty" json:"output,omitempty"`
	// Limits are AIP-17 resource caps; they may only narrow the bundle's (see EffectiveLimits).
	Limits *RunnerLimits   `yaml:"limits,omitempty" json:"limits,omitempty"`
	Parsed []TemplateToken `yaml:"-" json:"-"` // Argv parsed; nil when it did not parse or the tool has steps
	// ParsedStdin is Stdin parsed; nil without stdin or when it did not parse.
	ParsedStdin *TemplateToken `yaml:"-" json:"-"`
	// StepsParsed reports that the tool has steps and every template in them parsed.
	StepsParsed bool `yaml:"-" json:"-"`
}

// Callable reports whether the runner's templates parsed, so the tool can be run.
func (r *ToolRunner) Callable() bool {
	if len(r.Steps) > 0 {
		return r.StepsParsed
	}
	return r.Parsed != nil && (r.Stdin == nil || r.ParsedStdin != nil)
}

// ToolStep is one process of a multi-step tool (runner.steps, a clihost extension modelled on
// UTCP's CLI call templates). Every template may use ${input.…}, ${secrets.…} and the output of an
// earlier step, ${steps.N.output}.
type ToolStep struct {
	// Bin is the program: empty for the bundle's bin (with bin_args), else a name listed in the
	// effective sandbox's exec.spawn (a bare name found on PATH, or an absolute path).
	Bin string `yaml:"bin,omitempty" json:"bin,omitempty"`
	// Argv is the argv template after the program.
	Argv []string `yaml:"argv" json:"argv"`
	// Dir is the working directory, relative to the workspace (a template); it may not leave it.
	Dir string `yaml:"dir,omitempty" json:"dir,omitempty"`
	// Env are variables added to the process's environment (values are templates).
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Stdin is a template for the process's standard input; nil means /dev/null.
	Stdin *string `yaml:"stdin,omitempty" json:"stdin,omitempty"`
	// AppendToFinalOutput says whether the step's output is part of the tool's result; absent means
	// true for the last step and false for the others.
	AppendToFinalOutput *bool `yaml:"append_to_final_output,omitempty" json:"append_to_final_output,omitempty"`

	Parsed      []TemplateToken          `yaml:"-" json:"-"` // Argv parsed
	ParsedDir   *TemplateToken           `yaml:"-" json:"-"` // Dir parsed; nil without dir
	ParsedEnv   map[string]TemplateToken `yaml:"-" json:"-"` // Env values parsed
	ParsedStdin *TemplateToken           `yaml:"-" json:"-"` // Stdin parsed; nil without stdin
}

// Appends reports whether step i of n steps contributes to the tool's result.
func (s *ToolStep) Appends(i, n int) bool {
	if s.AppendToFinalOutput != nil {
		return *s.AppendToFinalOutput
	}
	return i == n-1
}

// ToolOutput overrides the bundle's output convention for one tool.
type ToolOutput struct {
	Format       string            `yaml:"format,omitempty" json:"format,omitempty"`
	JSONFlagArgs []string          `yaml:"json_flag_args,omitempty" json:"json_flag_args,omitempty"`
	ExitCodes    map[string]string `yaml:"exit_codes,omitempty" json:"exit_codes,omitempty"`
	Stream       string            `yaml:"stream,omitempty" json:"stream,omitempty"`
	// Empty overrides the bundle's output.empty for this tool.
	Empty string `yaml:"empty,omitempty" json:"empty,omitempty"`
	// File names the input (a string with format: path) whose workspace path receives the
	// program's standard output; the call's value is then {path, bytes}.
	File string `yaml:"file,omitempty" json:"file,omitempty"`
}

// ReviewKey is the metadata key of a note asking a person to review a generated tool (clihostctl
// import cobra writes it for commands that delete, deploy or serve); lint warns while it is there.
const ReviewKey = "clihost.review"

// Annotations are the MCP tool annotations derived from the contract (DESIGN.md).
type Annotations struct {
	ReadOnly    bool `json:"readOnlyHint"`
	Destructive bool `json:"destructiveHint"`
	Idempotent  bool `json:"idempotentHint"`
	OpenWorld   bool `json:"openWorldHint"`
}

// Annotations derives the MCP hints: read-only when risk_level is 0 and nothing is mutated;
// destructive at risk_level 3; idempotent from `idempotent`; open-world when `mutates` names a
// network: or external: scope.
func (t *Tool) Annotations() Annotations {
	a := Annotations{
		ReadOnly:    t.RiskLevel == 0 && len(t.Mutates) == 0,
		Destructive: t.RiskLevel == 3,
		Idempotent:  t.Idempotent,
	}
	for _, m := range t.Mutates {
		if strings.HasPrefix(m, "network:") || strings.HasPrefix(m, "external:") {
			a.OpenWorld = true
		}
	}
	return a
}

// MCPDescription is the description an MCP client sees for a tool: the tool's own, followed by the
// command it runs and the CLI it belongs to ("Runs `gh pr list` (GitHub CLI)."; "Runs `jq` (jq)."
// for a CLI without subcommands, whose tool names are not words of its command line).
func MCPDescription(cli *CLI, t *ToolEntry) string {
	d := strings.TrimSpace(t.Tool.Description)
	return fmt.Sprintf("%s\n\nRuns %s (%s).", d, commandLine(cli, t), cli.Name)
}

// commandLine is the command a tool runs, quoted: the bundle's bin and the leading words of its
// argv, or each step's program and words joined with ", then ".
func commandLine(cli *CLI, t *ToolEntry) string {
	r := t.Tool.Runner
	if r == nil || len(r.Steps) == 0 {
		var argv []string
		if r != nil {
			argv = r.Argv
		}
		return "`" + strings.Join(append([]string{cli.Bin}, commandWords(argv, len(t.Path))...), " ") + "`"
	}
	steps := make([]string, 0, len(r.Steps))
	for _, s := range r.Steps {
		bin := cli.Bin
		if s.Bin != "" {
			bin = s.Bin
		}
		steps = append(steps, "`"+strings.Join(append([]string{bin}, commandWords(s.Argv, len(t.Path))...), " ")+"`")
	}
	return strings.Join(steps, ", then ")
}

// commandWords are an argv template's subcommand words: its leading literal tokens that are not
// options, at most n (the tool's command path's length). A CLI without subcommands names its tools
// freely (jq's eval runs `jq --null-input …`), so those names are never shown as words.
func commandWords(argv []string, n int) []string {
	var words []string
	for _, a := range argv {
		if len(words) == n || a == "" || strings.HasPrefix(a, "-") || strings.Contains(a, "${") || strings.ContainsAny(a, " \t\n") {
			break
		}
		words = append(words, a)
	}
	return words
}
