package output

import "github.com/clihost/clihost/manifest"

// The inputs a provider bundle's tool takes: the prompt, and optionally the model.
const (
	ProviderPromptInput = "prompt"
	ProviderModelInput  = "model"
	defaultProviderTool = "ask"
)

// ProviderSpec is how a provider bundle (one with a metadata.provider block in its CLI.md) is
// driven:
//
//	metadata:
//	  provider:
//	    tool: ask            # the tool that takes {"prompt": …} (default ask)
//	    format: stream-json  # how to read the tool's stdout: text, json or stream-json (default text)
type ProviderSpec struct {
	Tool   string `json:"tool"`
	Format string `json:"format"`
	// Model says the tool takes a "model" input (what clihostctl ask --model sets).
	Model bool `json:"model"`
}

// ProviderOf reads b's metadata.provider block; ok is false when b has none (it is not a provider
// bundle), and the spec then holds the defaults.
func ProviderOf(b *manifest.Bundle) (spec ProviderSpec, ok bool) {
	spec = ProviderSpec{Tool: defaultProviderTool, Format: ProviderText}
	if b == nil || b.CLI == nil {
		return spec, false
	}
	p, ok := b.CLI.Metadata["provider"].(map[string]any)
	if s, _ := p["tool"].(string); s != "" {
		spec.Tool = s
	}
	if s, _ := p["format"].(string); s != "" {
		spec.Format = s
	}
	if t := b.Tool(spec.Tool); t != nil && t.Tool != nil {
		spec.Model = manifest.InputProperty(t.Tool.Inputs, []string{ProviderModelInput}) != nil
	}
	return spec, ok
}
