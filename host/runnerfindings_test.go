package host

import (
	"context"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// TestRunnerFindingsPointAtTheBlock: what this host cannot honour of a runner (a needs.native
// package it lacks, an engine: sandbox it cannot run) is reported at the line that asks for it,
// in CLI.md's inline block or in the RUNNER.md, not at the bundle's id, so that an author's
// editor jumps to what to change.
func TestRunnerFindingsPointAtTheBlock(t *testing.T) {
	fixture.Need(t, "jq", "dpkg-query")
	const absent = "clihost-absent-package"
	cases := []struct {
		name, runner, runnerMD, rule, file string
		line                               int
		path                               string
	}{
		{name: "inline needs", runner: "\n  engine: subprocess\n  needs: { native: [jq, " + absent + "] }", rule: "runner-needs-missing", file: "CLI.md", line: 11},
		{name: "RUNNER.md needs", runner: "./RUNNER.md", runnerMD: "---\nengine: subprocess\nneeds:\n  native: [jq, " + absent + "]\n---\n", rule: "runner-needs-missing", file: "RUNNER.md", line: 4},
		{name: "RUNNER.md image", runner: "./RUNNER.md", runnerMD: "---\nengine: sandbox\nimage: localhost/clihost-absent:1\n---\n", rule: "runner-host", file: "RUNNER.md", line: 3, path: t.TempDir()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := jqBoxBundle(tc.runner)
			if tc.runnerMD != "" {
				files["box/RUNNER.md"] = tc.runnerMD
			}
			opts := Options{}
			if tc.path != "" {
				opts.LookupEnv = envWith(map[string]string{"PATH": tc.path})
			}
			h, _ := writeBundle(t, files, opts)
			var got *manifest.Finding
			fs := h.RunnerFindings(context.Background(), bundle(t, h, "box"))
			for i := range fs {
				if fs[i].Rule == tc.rule {
					got = &fs[i]
				}
			}
			if got == nil {
				t.Fatalf("no %s finding: %v", tc.rule, fs)
			}
			if !strings.HasSuffix(got.Pos.File, tc.file) || got.Pos.Line != tc.line || got.Pos.Col < 1 || got.Hint == "" {
				t.Fatalf("finding at %s, want %s line %d (with a hint): %s", got.Pos, tc.file, tc.line, got)
			}
		})
	}
}
