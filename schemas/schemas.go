// Package schemas embeds clihost's JSON Schemas (draft 2020-12) for CLI.md and TOOL.md frontmatter
// and compiles each once. They accept what the upstream AIP-29 and AIP-14 schemas accept plus
// clihost's documented extensions (see docs/authoring.md).
package schemas

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// CLISchemaJSON is the text of CLI.schema.json.
//
//go:embed CLI.schema.json
var CLISchemaJSON []byte

// ToolSchemaJSON is the text of TOOL.schema.json.
//
//go:embed TOOL.schema.json
var ToolSchemaJSON []byte

// RunnerSchemaJSON is the text of RUNNER.schema.json: the AIP-17 runner block (CLI.md's inline
// runner and a RUNNER.md's frontmatter).
//
//go:embed RUNNER.schema.json
var RunnerSchemaJSON []byte

// IntentSchemaJSON is the text of INTENT.schema.json (AIP-28's draft schema).
//
//go:embed INTENT.schema.json
var IntentSchemaJSON []byte

// The URLs under which the schemas are registered with the compiler (their $id).
const (
	CLISchemaURL    = "https://clihost.dev/schemas/agentcli-v1/CLI.schema.json"
	ToolSchemaURL   = "https://clihost.dev/schemas/agentcli-v1/TOOL.schema.json"
	RunnerSchemaURL = "https://clihost.dev/schemas/agentcli-v1/RUNNER.schema.json"
	IntentSchemaURL = "https://clihost.dev/schemas/agentcli-v1/INTENT.schema.json"
)

var (
	once                  sync.Once
	cliSchema, toolSchema *jsonschema.Schema
	runnerSchema          *jsonschema.Schema
	intentSchema          *jsonschema.Schema
	compileErr            error
)

func compileAll() {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	if err := c.AddResource(CLISchemaURL, bytes.NewReader(CLISchemaJSON)); err != nil {
		compileErr = fmt.Errorf("load CLI schema: %w", err)
		return
	}
	if err := c.AddResource(ToolSchemaURL, bytes.NewReader(ToolSchemaJSON)); err != nil {
		compileErr = fmt.Errorf("load TOOL schema: %w", err)
		return
	}
	if err := c.AddResource(RunnerSchemaURL, bytes.NewReader(RunnerSchemaJSON)); err != nil {
		compileErr = fmt.Errorf("load RUNNER schema: %w", err)
		return
	}
	if runnerSchema, compileErr = c.Compile(RunnerSchemaURL); compileErr != nil {
		compileErr = fmt.Errorf("compile RUNNER schema: %w", compileErr)
		return
	}
	if cliSchema, compileErr = c.Compile(CLISchemaURL); compileErr != nil {
		compileErr = fmt.Errorf("compile CLI schema: %w", compileErr)
		return
	}
	if toolSchema, compileErr = c.Compile(ToolSchemaURL); compileErr != nil {
		compileErr = fmt.Errorf("compile TOOL schema: %w", compileErr)
		return
	}
	if err := c.AddResource(IntentSchemaURL, bytes.NewReader(IntentSchemaJSON)); err != nil {
		compileErr = fmt.Errorf("load INTENT schema: %w", err)
		return
	}
	if intentSchema, compileErr = c.Compile(IntentSchemaURL); compileErr != nil {
		compileErr = fmt.Errorf("compile INTENT schema: %w", compileErr)
	}
}

// CLI returns the compiled CLI.md frontmatter schema.
func CLI() (*jsonschema.Schema, error) {
	once.Do(compileAll)
	return cliSchema, compileErr
}

// Tool returns the compiled TOOL.md frontmatter schema.
func Tool() (*jsonschema.Schema, error) {
	once.Do(compileAll)
	return toolSchema, compileErr
}

// Runner returns the compiled AIP-17 runner block schema (a RUNNER.md's frontmatter).
func Runner() (*jsonschema.Schema, error) {
	once.Do(compileAll)
	return runnerSchema, compileErr
}

// Intent returns the compiled INTENT.md (AIP-28) frontmatter schema.
func Intent() (*jsonschema.Schema, error) {
	once.Do(compileAll)
	return intentSchema, compileErr
}
