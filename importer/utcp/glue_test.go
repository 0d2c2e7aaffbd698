package utcp

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// TestGlueOptionValues: a placeholder (or a step's output) right after a literal long option is
// written glued, --name=VALUE, as the Cobra importer writes flags, so a value starting with '-'
// reaches the option instead of being refused. Not glued: short options (-n VALUE: -la PATH is as
// likely, and -laPATH would be wrong), anything after a literal --, an option already glued or
// followed by a literal, and curl's and jq's options (they refuse --name=VALUE).
func TestGlueOptionValues(t *testing.T) {
	for _, c := range []struct {
		command string
		argv    []string
	}{
		{"grep --regexp UTCP_ARG_p_UTCP_END -- UTCP_ARG_path_UTCP_END", []string{"--regexp=${input.p}", "--", "${input.path}"}},
		{`tool --title "UTCP_ARG_a_UTCP_END-x" --verbose UTCP_ARG_b_UTCP_END`, []string{"--title=${input.a}-x", "--verbose=${input.b}"}},
		{"tool --label=UTCP_ARG_a_UTCP_END --mode fast UTCP_ARG_b_UTCP_END", []string{"--label=${input.a}", "--mode", "fast", "${input.b}"}},
		{"tool -- --name UTCP_ARG_a_UTCP_END", []string{"--", "--name", "${input.a}"}},
		{"git log -n UTCP_ARG_n_UTCP_END", []string{"log", "-n", "${input.n}"}},
		{"ls -la UTCP_ARG_path_UTCP_END", []string{"-la", "${input.path}"}},
		{"curl --header UTCP_ARG_h_UTCP_END --url UTCP_ARG_u_UTCP_END", []string{"--header", "${input.h}", "--url", "${input.u}"}},
		{"/usr/bin/jq -n --arg x UTCP_ARG_v_UTCP_END --indent UTCP_ARG_i_UTCP_END", []string{"-n", "--arg", "x", "${input.v}", "--indent", "${input.i}"}},
		{"tool '$${x}' --literal '${x}'", []string{"$$${x}", "--literal", "$${x}"}},
	} {
		got, r := translateOne(t, c.command)
		if r != nil {
			t.Fatalf("%s: %v", c.command, r)
		}
		if !slices.Equal(got.steps[0].Argv, c.argv) {
			t.Errorf("%s: argv %q, want %q", c.command, got.steps[0].Argv, c.argv)
		}
	}
	got, r := translateOne(t, "echo x", "tool --title $CMD_0_OUTPUT")
	if r != nil || !slices.Equal(got.steps[1].Argv, []string{"--title=${steps.0.output}"}) {
		t.Fatalf("step output: %v %q", r, got.steps[1].Argv)
	}
}

// TestGluedOptionRuns imports a manual whose command passes a placeholder after a long option
// (basename --suffix VALUE): the bundle lints clean, argv-option-value included (fixture.Registry
// fails on any finding), and a call with a suffix starting with '-' runs, the value reaching
// --suffix. Before, the argv was ["--suffix", "${input.suffix}"], which lint warned about and the
// host refused for "-x" (input_invalid).
func TestGluedOptionRuns(t *testing.T) {
	need(t, "/usr/bin/basename")
	manual := `{"utcp_version": "1.0.1", "tools": [{"name": "strip", "description": "Strip a suffix from a name.",
		"inputs": {"type": "object", "properties": {"suffix": {"type": "string"}, "name": {"type": "string"}}},
		"tool_call_template": {"call_template_type": "cli", "commands": [{"command": "basename --suffix UTCP_ARG_suffix_UTCP_END -- UTCP_ARG_name_UTCP_END"}]}}]}`
	b, err := Convert([]byte(manual), Options{ID: "glued"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, data := range b.Files {
		files["glued/"+name] = string(data)
	}
	h := host.New(fixture.Registry(t, files), host.Options{})
	bundle, err := h.Bundle("glued")
	if err != nil {
		t.Fatal(err)
	}
	ws := fixture.Workspace(t)
	for _, c := range []struct{ suffix, name, want string }{{"-x", "file-x", "file"}, {".txt", "-a.txt", "-a"}} {
		env := h.Call(context.Background(), bundle, "strip", map[string]any{"suffix": c.suffix, "name": c.name}, host.Caller{Workspace: ws}, host.CallOptions{})
		if !env.OK || env.Value != c.want {
			raw, _ := json.Marshal(env)
			t.Errorf("suffix %q name %q: %s, want %q", c.suffix, c.name, raw, c.want)
		}
	}
}
