package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/output"
)

// maxProviderInput bounds what `output parse` and `output classify` read from stdin.
const maxProviderInput = 64 << 20

func newOutputCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "output",
		Short: "Parse or classify an agent CLI's output the way `ask` does (for debugging provider bundles)",
		Long: `The provider output layer on its own: parse reads an agent CLI's stdout and prints the answer
and token usage; classify reads a failed run's output and prints its error category with the retry
and fallback answers. See docs/providers.md.`,
	}
	cmd.AddCommand(newOutputParseCmd(g), newOutputClassifyCmd(g))
	return cmd
}

// outputOptions are the flags of output parse and output classify.
type outputOptions struct {
	*globalOptions
	format, prompt string // parse
	exitCode       int    // classify
}

func newOutputParseCmd(g *globalOptions) *cobra.Command {
	o := &outputOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "parse",
		Short: "Read provider output on stdin and print {content, usage, estimated} as JSON",
		Long: `Parse strips ANSI escapes from stdin and extracts the answer by --format:
  text         the whole output, trimmed
  json         one object: content, text, response, message, output, result, Anthropic content
               blocks, OpenAI choices, message.content
  stream-json  JSON Lines events of Claude Code, Codex, Gemini, ax-glm/ax-grok (metadata skipped)
Usage comes from the output; without one it is estimated as ceil(characters/4) and "estimated" is
true (input tokens from --prompt, else 0). An error the output reports is printed as "error".`,
		Example: `  claude -p --output-format stream-json --verbose "hi" | clihostctl output parse --format stream-json`,
		Args:    exactArgs(0),
		RunE:    func(*cobra.Command, []string) error { return runOutputParse(o) },
	}
	cmd.Flags().StringVar(&o.format, "format", output.ProviderText, "the output format: text, json or stream-json")
	cmd.Flags().StringVar(&o.prompt, "prompt", "", "the prompt, for the input-token estimate")
	return cmd
}

// runOutputParse parses the provider output on stdin and prints the result.
func runOutputParse(o *outputOptions) error {
	data, err := io.ReadAll(io.LimitReader(o.io.In, maxProviderInput))
	if err != nil {
		return err
	}
	r, err := output.ParseProvider(o.format, data)
	if err != nil {
		return usageError{err}
	}
	if r.Estimated && o.prompt != "" {
		r.Usage.InputTokens = output.EstimateTokens(o.prompt)
	}
	return writeProviderJSON(o.io.Out, r)
}

// classifyJSON is what `output classify` prints: retry_after_ms is null when no wait applies.
type classifyJSON struct {
	Category       string `json:"category"`
	ShouldRetry    bool   `json:"should_retry"`
	ShouldFallback bool   `json:"should_fallback"`
	RetryAfterMS   *int64 `json:"retry_after_ms"`
}

func newOutputClassifyCmd(g *globalOptions) *cobra.Command {
	o := &outputOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "classify",
		Short: "Read a failed provider run's output on stdin and print its error category as JSON",
		Long: `Classify puts the text on stdin (stderr, stdout or both) in one of ten categories, checked in this
order: quota, rate_limit, authentication, validation, network, server, timeout, not_found,
configuration, unknown. It prints {category, should_retry, should_fallback, retry_after_ms}. An
error reported as JSON (an error event, {"error":…}, a result with is_error) is classified instead
of the text around it; empty input is classified as "Exit code: N".`,
		Example: `  echo 'HTTP 429 rate_limit_error: retry after 30 seconds' | clihostctl output classify`,
		Args:    exactArgs(0),
		RunE:    func(*cobra.Command, []string) error { return runOutputClassify(o) },
	}
	cmd.Flags().IntVar(&o.exitCode, "exit-code", 1, "the process's exit code")
	return cmd
}

// runOutputClassify classifies the failed run's output on stdin and prints the category.
func runOutputClassify(o *outputOptions) error {
	data, err := io.ReadAll(io.LimitReader(o.io.In, maxProviderInput))
	if err != nil {
		return err
	}
	pe := output.ClassifyProvider(string(data), o.exitCode)
	out := classifyJSON{Category: pe.Category, ShouldRetry: pe.ShouldRetry, ShouldFallback: pe.ShouldFallback}
	if pe.RetryAfterMS > 0 {
		out.RetryAfterMS = &pe.RetryAfterMS
	}
	return writeProviderJSON(o.io.Out, out)
}

func writeProviderJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return nil
}
