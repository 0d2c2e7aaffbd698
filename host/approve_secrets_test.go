package host

import (
	"testing"

	"github.com/clihost/clihost/manifest"
)

// TestRunnerDigestCoversSecrets: an approval is bound to the secrets its tool receives (which
// ones, in which variables, which field): a SECRETS.md reloaded between the question and the
// answer so that the tool gets another secret, or a secret in another variable, asks again; one
// bound to another tool does not change it.
func TestRunnerDigestCoversSecrets(t *testing.T) {
	tool := &manifest.ToolEntry{Path: []string{"show"}, Tool: &manifest.Tool{ID: "vault.show", Runner: &manifest.ToolRunner{}}}
	digest := func(slots ...manifest.SecretSlot) string {
		return runnerDigest(&manifest.Bundle{CLI: &manifest.CLI{ID: "vault", Bin: "jq"}, Secrets: slots}, tool)
	}
	token := manifest.SecretSlot{Slug: "vault-token", Kind: "opaque", Required: true, Env: []manifest.SecretEnv{{Name: "VAULT_TOKEN"}}}
	none := digest()
	one := digest(token)
	if one == none {
		t.Fatal("binding a secret to the tool does not change what its approval is bound to")
	}
	moved := token
	moved.Env = []manifest.SecretEnv{{Name: "OTHER_TOKEN"}}
	if digest(moved) == one {
		t.Fatal("moving the secret to another variable does not change what its approval is bound to")
	}
	elsewhere := token
	elsewhere.Bound, elsewhere.Tools = true, []string{"vault.other"}
	if digest(elsewhere) != none {
		t.Fatal("a secret bound to another tool changes this tool's approval")
	}
}
