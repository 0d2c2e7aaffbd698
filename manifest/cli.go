package manifest

import (
	"go.yaml.in/yaml/v3"
)

// CLI is the frontmatter of a CLI.md manifest (AIP-29 agentcli/v1). Positions of every value are
// kept by the Document it was decoded from; look them up with Bundle.Pos and a JSON pointer.
type CLI struct {
	Schema       string          `yaml:"schema,omitempty" json:"schema,omitempty"`
	Name         string          `yaml:"name" json:"name"`
	ID           string          `yaml:"id" json:"id"`
	Description  string          `yaml:"description" json:"description"`
	Version      string          `yaml:"version" json:"version"`
	Bin          string          `yaml:"bin" json:"bin"`
	BinArgs      []string        `yaml:"bin_args,omitempty" json:"bin_args,omitempty"`
	Install      []InstallMethod `yaml:"install" json:"install"`
	VersionCheck VersionCheck    `yaml:"version_check" json:"version_check"`
	Setup        []SetupStep     `yaml:"setup,omitempty" json:"setup,omitempty"`
	Auth         *Auth           `yaml:"auth,omitempty" json:"auth,omitempty"`
	Runner       *RunnerRef      `yaml:"runner,omitempty" json:"runner,omitempty"`
	Sandbox      Sandbox         `yaml:"sandbox" json:"sandbox"`
	Output       *Output         `yaml:"output,omitempty" json:"output,omitempty"`
	Commands     CommandTree     `yaml:"commands" json:"commands"`
	// Intents are the INTENT.md files (AIP-28) the bundle ships, under AIP-29's prose name;
	// Actions is the same list under the name AIP-29's CLI.schema.json gives it (IntentRefs reads
	// whichever is declared; lint refuses both).
	Intents  []IntentRef    `yaml:"intents,omitempty" json:"intents,omitempty"`
	Actions  []IntentRef    `yaml:"actions,omitempty" json:"actions,omitempty"`
	Requires *Requires      `yaml:"requires,omitempty" json:"requires,omitempty"`
	Examples []CLIExample   `yaml:"examples,omitempty" json:"examples,omitempty"`
	Tags     []string       `yaml:"tags,omitempty" json:"tags,omitempty"`
	Metadata map[string]any `yaml:"metadata,omitempty" json:"metadata,omitempty"`
}

// The install methods of AIP-29 v1.
const (
	MethodBrew     = "brew"
	MethodApt      = "apt"
	MethodDnf      = "dnf"
	MethodPacman   = "pacman"
	MethodChoco    = "choco"
	MethodScoop    = "scoop"
	MethodNpm      = "npm"
	MethodPip      = "pip"
	MethodCargo    = "cargo"
	MethodGo       = "go"
	MethodCurl     = "curl"
	MethodDownload = "download"
	MethodVendored = "vendored"
)

// KnownMethods lists the install methods this version of clihost understands, in the spec's order.
var KnownMethods = []string{MethodBrew, MethodApt, MethodDnf, MethodPacman, MethodChoco, MethodScoop,
	MethodNpm, MethodPip, MethodCargo, MethodGo, MethodCurl, MethodDownload, MethodVendored}

// IsKnownMethod reports whether m is one of KnownMethods.
func IsKnownMethod(m string) bool {
	for _, k := range KnownMethods {
		if k == m {
			return true
		}
	}
	return false
}

// InstallMethod is one entry of install. Which fields apply depends on Method.
type InstallMethod struct {
	Method       string   `yaml:"method" json:"method"`
	Package      string   `yaml:"package,omitempty" json:"package,omitempty"`             // brew apt dnf pacman choco scoop npm pip cargo go
	Global       *bool    `yaml:"global,omitempty" json:"global,omitempty"`               // npm
	User         *bool    `yaml:"user,omitempty" json:"user,omitempty"`                   // pip
	URL          string   `yaml:"url,omitempty" json:"url,omitempty"`                     // curl download
	ExtractBin   string   `yaml:"extract_bin,omitempty" json:"extract_bin,omitempty"`     // download
	VerifySHA256 string   `yaml:"verify_sha256,omitempty" json:"verify_sha256,omitempty"` // curl download
	Path         string   `yaml:"path,omitempty" json:"path,omitempty"`                   // vendored
	Experimental bool     `yaml:"experimental,omitempty" json:"experimental,omitempty"`
	OS           []string `yaml:"os,omitempty" json:"os,omitempty"`     // clihost extension
	Arch         []string `yaml:"arch,omitempty" json:"arch,omitempty"` // clihost extension
}

// VersionCheck says how to detect and validate the installed binary's version.
type VersionCheck struct {
	Cmd       string `yaml:"cmd" json:"cmd"`
	Parse     string `yaml:"parse" json:"parse"`
	Range     string `yaml:"range" json:"range"`
	TimeoutMS int    `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
}

// The setup step kinds.
const (
	StepCmd      = "cmd"
	StepPrompt   = "prompt"
	StepOAuth    = "oauth"
	StepExternal = "external"
)

// SetupStep is one step of the post-install setup pipeline.
type SetupStep struct {
	ID          string         `yaml:"id" json:"id"`
	Kind        string         `yaml:"kind" json:"kind"`
	Description string         `yaml:"description,omitempty" json:"description,omitempty"`
	SkipIf      *SkipIf        `yaml:"skip_if,omitempty" json:"skip_if,omitempty"`
	Persist     *Persist       `yaml:"persist,omitempty" json:"persist,omitempty"`
	Cmd         string         `yaml:"cmd,omitempty" json:"cmd,omitempty"`                 // cmd
	TimeoutMS   int            `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`   // cmd
	Interactive bool           `yaml:"interactive,omitempty" json:"interactive,omitempty"` // cmd
	Prompt      string         `yaml:"prompt,omitempty" json:"prompt,omitempty"`           // prompt
	Type        string         `yaml:"type,omitempty" json:"type,omitempty"`               // prompt: text select boolean secret
	Default     string         `yaml:"default,omitempty" json:"default,omitempty"`         // prompt
	Options     *PromptOptions `yaml:"options,omitempty" json:"options,omitempty"`         // prompt (select)
	SecretSlug  string         `yaml:"secret_slug,omitempty" json:"secret_slug,omitempty"` // oauth
	URL         string         `yaml:"url,omitempty" json:"url,omitempty"`                 // external
	Callback    *Callback      `yaml:"callback,omitempty" json:"callback,omitempty"`       // external
	OAuth       *OAuthFlow     `yaml:"oauth,omitempty" json:"oauth,omitempty"`             // oauth
}

// OAuthFlow is the OAuth 2.0 flow an oauth setup step drives (see oauth.go).
type OAuthFlow struct {
	Flow                   string   `yaml:"flow,omitempty" json:"flow,omitempty"` // authorization_code (default) or device_code
	ClientID               string   `yaml:"client_id" json:"client_id"`
	AuthorizationURL       string   `yaml:"authorization_url,omitempty" json:"authorization_url,omitempty"`               // authorization_code
	DeviceAuthorizationURL string   `yaml:"device_authorization_url,omitempty" json:"device_authorization_url,omitempty"` // device_code
	TokenURL               string   `yaml:"token_url" json:"token_url"`
	Scopes                 []string `yaml:"scopes,omitempty" json:"scopes,omitempty"`
	TimeoutMS              int      `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
}

// SkipIf skips a setup step when its command exits with ExitCode (default 0).
type SkipIf struct {
	Cmd       string `yaml:"cmd" json:"cmd"`
	ExitCode  int    `yaml:"exit_code,omitempty" json:"exit_code,omitempty"`
	TimeoutMS int    `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
}

// Persist says where a setup step's value lands: exactly one of Env, SecretSlug or Cmd.
type Persist struct {
	Env        string `yaml:"env,omitempty" json:"env,omitempty"`
	SecretSlug string `yaml:"secret_slug,omitempty" json:"secret_slug,omitempty"`
	Cmd        string `yaml:"cmd,omitempty" json:"cmd,omitempty"`
}

// PromptOptions are a select prompt's choices: a static list, or a command printing one
// `value<TAB>label` per line.
type PromptOptions struct {
	Static    []string `json:"static,omitempty"`
	Cmd       string   `json:"cmd,omitempty"`
	TimeoutMS int      `json:"timeout_ms,omitempty"`
}

// UnmarshalYAML accepts either a list of strings or {cmd, timeout_ms}.
// A malformed value decodes as far as it can without failing: the schema reports the problem.
func (o *PromptOptions) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		_ = n.Decode(&o.Static)
		return nil
	}
	var c struct {
		Cmd       string `yaml:"cmd"`
		TimeoutMS int    `yaml:"timeout_ms"`
	}
	_ = n.Decode(&c)
	o.Cmd, o.TimeoutMS = c.Cmd, c.TimeoutMS
	return nil
}

// Callback says how an external step reads its result from the host's callback URL.
type Callback struct {
	Param     string `yaml:"param,omitempty" json:"param,omitempty"`
	TimeoutMS int    `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
}

// Auth is the authentication surface of a CLI.
type Auth struct {
	Ref     string     `yaml:"ref,omitempty" json:"ref,omitempty"`
	State   *AuthState `yaml:"state,omitempty" json:"state,omitempty"`
	Login   *Login     `yaml:"login,omitempty" json:"login,omitempty"`
	Refresh *Refresh   `yaml:"refresh,omitempty" json:"refresh,omitempty"`
	Expiry  *Expiry    `yaml:"expiry,omitempty" json:"expiry,omitempty"`
}

// AuthState lists where the CLI keeps its authentication state.
type AuthState struct {
	Paths []string `yaml:"paths,omitempty" json:"paths,omitempty"`
	Env   []string `yaml:"env,omitempty" json:"env,omitempty"`
}

// Login is the login flow.
type Login struct {
	Cmd                 string     `yaml:"cmd" json:"cmd"`
	Interactive         bool       `yaml:"interactive,omitempty" json:"interactive,omitempty"`
	RequiresCallbackURL bool       `yaml:"requires_callback_url,omitempty" json:"requires_callback_url,omitempty"`
	CompletesWhen       *ExitCheck `yaml:"completes_when,omitempty" json:"completes_when,omitempty"`
}

// ExitCheck is a command whose exit code answers a yes/no question.
type ExitCheck struct {
	Cmd      string `yaml:"cmd" json:"cmd"`
	ExitCode int    `yaml:"exit_code,omitempty" json:"exit_code,omitempty"`
}

// Refresh is the periodic credential refresh.
type Refresh struct {
	Cmd   string `yaml:"cmd" json:"cmd"`
	Every string `yaml:"every,omitempty" json:"every,omitempty"`
}

// Expiry says how mid-flight auth expiry shows, as "exit_code:N".
type Expiry struct {
	Detect string `yaml:"detect,omitempty" json:"detect,omitempty"`
}

// RunnerLimits is AIP-17's runner.limits: resource caps of one call. Zero leaves a field to the
// host (whose operator limits always apply as well: the effective limit is the smallest).
type RunnerLimits struct {
	MemoryMB  int64 `yaml:"memory_mb,omitempty" json:"memory_mb,omitempty"`
	TimeoutMS int64 `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
	CPUMS     int64 `yaml:"cpu_ms,omitempty" json:"cpu_ms,omitempty"`
}

// EffectiveLimits returns the limits of a call of a tool: per field, the smaller of the bundle's
// (CLI.md runner.limits) and the tool's (TOOL.md runner.limits) where both are set, else the one
// that is. Either may be nil.
func EffectiveLimits(bundle *RunnerRef, tool *ToolRunner) RunnerLimits {
	var b, t RunnerLimits
	if bundle != nil && bundle.Limits != nil {
		b = *bundle.Limits
	}
	if tool != nil && tool.Limits != nil {
		t = *tool.Limits
	}
	narrow := func(x, y int64) int64 {
		if x <= 0 || (y > 0 && y < x) {
			return max(y, 0)
		}
		return x
	}
	return RunnerLimits{MemoryMB: narrow(b.MemoryMB, t.MemoryMB), TimeoutMS: narrow(b.TimeoutMS, t.TimeoutMS), CPUMS: narrow(b.CPUMS, t.CPUMS)}
}

// Sandbox is the policy a bundle's processes run under. In a TOOL.md every part is optional and
// may only narrow the bundle's.
type Sandbox struct {
	Network *Network `yaml:"network,omitempty" json:"network,omitempty"`
	FS      *FS      `yaml:"fs,omitempty" json:"fs,omitempty"`
	Exec    *Exec    `yaml:"exec,omitempty" json:"exec,omitempty"`
	Env     *Env     `yaml:"env,omitempty" json:"env,omitempty"`
	TTY     *TTY     `yaml:"tty,omitempty" json:"tty,omitempty"`
}

// Network lists allowed outbound hosts and the inbound URLs the host must expose.
type Network struct {
	Egress  []string `yaml:"egress" json:"egress"`
	Ingress []string `yaml:"ingress,omitempty" json:"ingress,omitempty"`
}

// FS holds glob-shaped filesystem permissions; Deny overrides Read and Write.
// A nil list means "not declared" (in a TOOL.md: inherited); an empty list means "nothing".
type FS struct {
	Read  []string `yaml:"read" json:"read"`
	Write []string `yaml:"write" json:"write"`
	Deny  []string `yaml:"deny,omitempty" json:"deny,omitempty"`
}

// Exec says whether the CLI may start other programs, and which. A spawn entry is a bare name
// (found on PATH), an absolute path, or a relative path naming a file in the node_modules tree
// of a binary installed by npm (an npm launcher's native binary); an entry that names nothing on
// this host runs nothing.
type Exec struct {
	Allow *bool    `yaml:"allow" json:"allow"`
	Spawn []string `yaml:"spawn,omitempty" json:"spawn,omitempty"`
}

// Allowed reports whether exec is allowed (false when undeclared).
func (e *Exec) Allowed() bool { return e != nil && e.Allow != nil && *e.Allow }

// Env says which host variables pass into the sandbox and which are forced.
type Env struct {
	Pass []string          `yaml:"pass,omitempty" json:"pass,omitempty"`
	Set  map[string]string `yaml:"set,omitempty" json:"set,omitempty"`
}

// TTY says whether the CLI needs a pseudo-terminal.
type TTY struct {
	Required bool `yaml:"required" json:"required"`
}

// Output is a CLI's output convention.
type Output struct {
	DefaultFormat string            `yaml:"default_format,omitempty" json:"default_format,omitempty"`
	JSONFlag      string            `yaml:"json_flag,omitempty" json:"json_flag,omitempty"`
	JSONFlagArgs  []string          `yaml:"json_flag_args,omitempty" json:"json_flag_args,omitempty"`
	ExitCodes     map[string]string `yaml:"exit_codes,omitempty" json:"exit_codes,omitempty"`
	Stream        string            `yaml:"stream,omitempty" json:"stream,omitempty"`
	ErrorStream   string            `yaml:"error_stream,omitempty" json:"error_stream,omitempty"`
	// Empty is the JSON text ("[]", "{}" or "null") an empty json or yaml result stands for.
	Empty string `yaml:"empty,omitempty" json:"empty,omitempty"`
}

// Requires lists capability requirements (AIP-7).
type Requires struct {
	OS          []string `yaml:"os,omitempty" json:"os,omitempty"`
	Arch        []string `yaml:"arch,omitempty" json:"arch,omitempty"`
	MinDiskMB   int      `yaml:"min_disk_mb,omitempty" json:"min_disk_mb,omitempty"`
	MinMemoryMB int      `yaml:"min_memory_mb,omitempty" json:"min_memory_mb,omitempty"`
}

// CLIExample is a canonical invocation for discovery.
type CLIExample struct {
	Goal string `yaml:"goal" json:"goal"`
	Cmd  string `yaml:"cmd" json:"cmd"`
	Note string `yaml:"note,omitempty" json:"note,omitempty"`
}

// Command is one node of the commands tree: a leaf with a TOOL.md Ref, or a group with Children.
// Order follows the manifest.
type Command struct {
	Name     string     `json:"name"`
	Ref      string     `json:"ref,omitempty"`
	Children []*Command `json:"children,omitempty"`
}

// CommandTree is the commands block.
type CommandTree []*Command

// UnmarshalYAML reads a nested mapping, keeping the manifest's order.
// A malformed tree decodes as far as it can without failing: the schema reports the problem.
func (t *CommandTree) UnmarshalYAML(n *yaml.Node) error {
	*t = decodeCommands(n, 0)
	return nil
}

func decodeCommands(n *yaml.Node, depth int) []*Command {
	if depth > maxDepth || n.Kind != yaml.MappingNode {
		return nil
	}
	var out []*Command
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		c := &Command{Name: k.Value}
		switch v.Kind {
		case yaml.ScalarNode:
			c.Ref = v.Value
		case yaml.MappingNode:
			c.Children = decodeCommands(v, depth+1)
		}
		out = append(out, c)
	}
	return out
}

// Leaf is a leaf of the commands tree: the command path and its TOOL.md reference.
type Leaf struct {
	Path    []string `json:"path"`
	Ref     string   `json:"ref"`
	Pointer string   `json:"-"` // JSON pointer of the ref in CLI.md
}

// Leaves returns the tree's leaves depth-first, in manifest order.
func (t CommandTree) Leaves() []Leaf {
	var out []Leaf
	var walk func(cs []*Command, path []string, ptr string)
	walk = func(cs []*Command, path []string, ptr string) {
		for _, c := range cs {
			p := append(append([]string(nil), path...), c.Name)
			cp := JoinPointer(ptr, c.Name)
			if c.Children != nil {
				walk(c.Children, p, cp)
			} else if c.Ref != "" {
				out = append(out, Leaf{Path: p, Ref: c.Ref, Pointer: cp})
			}
		}
	}
	walk(t, nil, "/commands")
	return out
}
