package manifest

import (
	"strings"
	"testing"
)

// baseArgv is the base tool's runner.argv, which stepsEdits replaces with runner.steps.
const baseArgv = `  argv: [item, list, "${input.state | optional('--state')}", "${input.limit | optional('--limit')}", "--", "${input.query}"]`

func stepsEdits(steps string) []edit {
	return []edit{
		{cliFile, "exec: { allow: false }", "exec: { allow: true, spawn: [jq, /usr/bin/printf] }"},
		{toolFile, baseArgv, "  steps:\n" + steps},
	}
}

func TestStepsLintClean(t *testing.T) {
	steps := `    - { argv: [item, list, "--", "${input.query}"], append_to_final_output: false }
    - { bin: jq, argv: [-n, --arg, s, "${steps.0.output}", "$s"], dir: "out/${input.query}", env: { Q: "${input.query}", X: "$${literal}" }, stdin: "${steps.0.output}" }
    - { bin: /usr/bin/printf, argv: ["%s", "was: ${steps.1.output}"] }
`
	b := LoadBundle(buildBundle(t, stepsEdits(steps), nil), cliFile, LoadOptions{})
	if len(b.Findings) != 0 {
		t.Fatalf("findings:\n%s", findingsText(b.Findings))
	}
	r := b.Tools[0].Tool.Runner
	if !r.Callable() || !r.StepsParsed || len(r.Steps) != 3 || r.Parsed != nil {
		t.Fatalf("runner: %+v", r)
	}
	s := r.Steps[1]
	if s.ParsedDir == nil || s.ParsedStdin == nil || len(s.ParsedEnv) != 2 {
		t.Fatalf("step 1: %+v", s)
	}
	if r.Steps[0].Appends(0, 3) || r.Steps[1].Appends(1, 3) || !r.Steps[2].Appends(2, 3) {
		t.Fatal("append_to_final_output defaults: only the last step appends")
	}
}

func TestStepsRules(t *testing.T) {
	cases := []struct {
		name, rule string
		edits      []edit
		marker     string // a line the finding must point at
	}{
		{"later step output", "argv-step-ref", stepsEdits("    - { argv: [\"${steps.0.output}\"] }\n"), "- { argv: [\"${steps.0"},
		{"step ref in argv", "argv-step-ref", []edit{{toolFile, `"${input.query}"]`, `"${steps.0.output}"]`}}, "  argv:"},
		{"bad step ref", "argv-syntax", stepsEdits("    - { argv: [\"${steps.x.output}\"] }\n"), "- { argv"},
		{"step ref filter", "argv-syntax", stepsEdits("    - { argv: [a] }\n    - { argv: [\"${steps.0.output | json()}\"] }\n"), "- { argv: [\"${steps"},
		{"undeclared input", "argv-undeclared-input", stepsEdits("    - { argv: [\"${input.nope}\"] }\n"), "- { argv"},
		{"bin not spawned", "step-bin", stepsEdits("    - { bin: curl, argv: [x] }\n"), "bin: curl"},
		{"bin relative", "step-bin", stepsEdits("    - { bin: ./jq, argv: [x] }\n"), "bin: ./jq"},
		{"spawn without allow", "step-bin", append(stepsEdits("    - { bin: jq, argv: [x] }\n"), edit{toolFile, "fs: { write: [] }", "fs: { write: [] }\n  exec: { allow: false }"}), "bin: jq"},
		{"dir absolute", "step-dir", stepsEdits("    - { argv: [x], dir: /etc }\n"), "dir: /etc"},
		{"dir escapes", "step-dir", stepsEdits("    - { argv: [x], dir: a/../.. }\n"), "dir: a/"},
		{"dir optional()", "argv-syntax", stepsEdits("    - { argv: [x], dir: \"${input.query | optional('--q')}\" }\n"), "dir:"},
		{"env name", "step-env", stepsEdits("    - { argv: [x], env: { \"1X\": y } }\n"), "- { argv: [x], env"},
		{"both argv and steps", "tool-runner-argv", []edit{{toolFile, baseArgv, baseArgv + "\n  steps: [{ argv: [x] }]"}}, "  steps:"},
		{"neither", "tool-runner-argv", []edit{{toolFile, baseArgv + "\n", ""}}, "runner:"},
		{"stdin with steps", "runner-stdin-steps", append(stepsEdits("    - { argv: [x] }\n"), edit{toolFile, "  cli: ../../CLI.md", "  cli: ../../CLI.md\n  stdin: x"}), "  stdin:"},
		{"stdin syntax", "argv-syntax", []edit{{toolFile, "  cli: ../../CLI.md", "  cli: ../../CLI.md\n  stdin: \"${input.query\""}}, "  stdin:"},
		{"empty steps", "schema-min-items", []edit{{toolFile, baseArgv, "  steps: []"}}, "  steps:"},
		{"unknown step key", "schema-additional-properties", stepsEdits("    - { argv: [x], shell: true }\n"), "- { argv: [x], shell"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := buildBundle(t, tc.edits, nil)
			b := LoadBundle(fsys, cliFile, LoadOptions{})
			want := lineOf(t, string(fsys[toolFile].Data), tc.marker)
			for _, f := range b.Findings {
				if f.Rule == tc.rule && f.Severity == SeverityError && f.Pos.File == toolFile && f.Pos.Line == want {
					return
				}
			}
			t.Fatalf("want %s at line %d; findings:\n%s", tc.rule, want, findingsText(b.Findings))
		})
	}
}

func TestStepTemplateParse(t *testing.T) {
	tok, err := ParseTemplateToken("a ${steps.12.output} b")
	if err != nil {
		t.Fatal(err)
	}
	e := tok.Exprs()[0]
	if n, err := e.Step(); err != nil || n != 12 || e.Source != "steps" {
		t.Fatalf("step %d %v %+v", n, err, e)
	}
	for _, bad := range []string{"${steps.01.output}", "${steps.0}", "${steps.0.stdout}", "${steps.-1.output}", "${steps.64.output}"} {
		if _, err := ParseTemplateToken(bad); err == nil || !strings.Contains(err.Error(), "step") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
