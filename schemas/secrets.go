package schemas

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// SecretsSchemaJSON is the text of SECRETS.schema.json, AIP-19's schema of a SECRETS.md inventory's
// frontmatter, as published (clihost adds nothing to it).
//
//go:embed SECRETS.schema.json
var SecretsSchemaJSON []byte

// SecretsSchemaURL is the URL under which the SECRETS.md schema is registered (its $id).
const SecretsSchemaURL = "https://agentproto.sh/schemas/aip-19/SECRETS.schema.json"

// Secrets returns the compiled SECRETS.md frontmatter schema (AIP-19).
var Secrets = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	if err := c.AddResource(SecretsSchemaURL, bytes.NewReader(SecretsSchemaJSON)); err != nil {
		return nil, fmt.Errorf("load SECRETS schema: %w", err)
	}
	s, err := c.Compile(SecretsSchemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile SECRETS schema: %w", err)
	}
	return s, nil
})
