package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPreCommitHookFilesCoverEveryBundleFile: the hook runs when any file with a frontmatter lint
// checks changes (one per schema in schemas/: CLI.md, TOOL.md, RUNNER.md, INTENT.md, SECRETS.md),
// at any depth; a bundle whose RUNNER.md or INTENT.md was broken was committed unlinted.
func TestPreCommitHookFilesCoverEveryBundleFile(t *testing.T) {
	data, err := os.ReadFile("../../.pre-commit-hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var hooks []struct {
		ID    string `yaml:"id"`
		Files string `yaml:"files"`
	}
	if err := yaml.Unmarshal(data, &hooks); err != nil || len(hooks) == 0 {
		t.Fatalf(".pre-commit-hooks.yaml: %v", err)
	}
	files := regexp.MustCompile(hooks[0].Files) // pre-commit's Python re; this pattern means the same in Go
	schemas, err := filepath.Glob("../../schemas/*.schema.json")
	if err != nil || len(schemas) < 5 {
		t.Fatalf("schemas: %v %v", schemas, err)
	}
	for _, s := range schemas {
		name := strings.TrimSuffix(filepath.Base(s), ".schema.json") + ".md"
		for _, p := range []string{name, ".cli/gh/" + name, "b/tools/x/" + name} {
			if !files.MatchString(p) {
				t.Errorf("hook %s: files %q does not match %s", hooks[0].ID, hooks[0].Files, p)
			}
		}
	}
	for _, p := range []string{"README.md", ".cli/gh/NOTES.md", "XCLI.md"} {
		if files.MatchString(p) {
			t.Errorf("hook %s: files %q matches %s, which is no bundle file", hooks[0].ID, hooks[0].Files, p)
		}
	}
}
