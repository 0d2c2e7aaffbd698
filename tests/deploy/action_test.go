package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/clihost/clihost/internal/fixture"
)

// action is what TestAction reads of action.yml.
type action struct {
	Inputs map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"inputs"`
	Runs struct {
		Using string `yaml:"using"`
		Steps []struct {
			ID   string            `yaml:"id"`
			Uses string            `yaml:"uses"`
			If   string            `yaml:"if"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"runs"`
}

// expression is a GitHub Actions ${{ … }} expression.
var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// actionRun is one run of the action's steps as a runner would run them.
type actionRun struct {
	outputs  map[string]map[string]string // step id → its outputs
	failed   string                       // the step that exited non-zero ("" none)
	code     int
	uploaded string // the upload-sarif step's sarif_file
	log      strings.Builder
}

// runAction runs action.yml's steps in dir as GitHub's runner runs a composite action's: each run
// step with `bash --noprofile --norc -eo pipefail`, its env with the expressions evaluated (inputs,
// github.action_path as the repository, earlier steps' outputs), GITHUB_OUTPUT and GITHUB_PATH
// files read back after each step. The uses steps are not run: setup-go (this machine has Go) and
// upload-sarif, whose sarif_file is recorded.
func runAction(t *testing.T, dir string, inputs map[string]string) *actionRun {
	t.Helper()
	data, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a action
	if err := yaml.Unmarshal(data, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	if a.Runs.Using != "composite" {
		t.Fatalf("action.yml runs using %q, want composite", a.Runs.Using)
	}
	root, _ := filepath.Abs("../../")
	temp := t.TempDir()
	r := &actionRun{outputs: map[string]map[string]string{}}
	path := os.Getenv("PATH")
	eval := func(s string) string {
		return expression.ReplaceAllStringFunc(s, func(e string) string {
			x := expression.FindStringSubmatch(e)[1]
			switch {
			case strings.HasPrefix(x, "inputs."):
				name := strings.TrimPrefix(x, "inputs.")
				if v, ok := inputs[name]; ok {
					return v
				}
				in, ok := a.Inputs[name]
				if !ok {
					t.Fatalf("action.yml uses undeclared input %s", name)
				}
				return in.Default
			case x == "github.action_path":
				return root
			case x == "github.action_ref":
				return "test"
			case strings.HasPrefix(x, "steps."):
				id, out, _ := strings.Cut(strings.TrimPrefix(x, "steps."), ".outputs.")
				return r.outputs[id][out]
			}
			t.Fatalf("action.yml: expression %q is not one the test evaluates", x)
			return ""
		})
	}
	for i, s := range a.Runs.Steps {
		if strings.Contains(s.Run, "${{") {
			t.Errorf("action.yml step %d splices an expression into its script (script injection): pass it through env", i)
		}
		if s.Uses != "" {
			if strings.HasPrefix(s.Uses, "github/codeql-action/upload-sarif@") {
				if r.uploaded = eval(s.With["sarif_file"]); !filepath.IsAbs(r.uploaded) {
					r.uploaded = filepath.Join(dir, r.uploaded)
				}
			}
			continue
		}
		if r.failed != "" {
			continue // a failed step ends the job: the steps after it (upload-sarif's always() aside) do not run
		}
		outFile, pathFile := filepath.Join(temp, "output"), filepath.Join(temp, "path")
		for _, f := range []string{outFile, pathFile} {
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.Run)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+path, "RUNNER_TEMP="+temp, "GITHUB_OUTPUT="+outFile, "GITHUB_PATH="+pathFile)
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+eval(v))
		}
		o, err := fixture.Run(cmd)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		r.log.WriteString(o.Stdout + o.Stderr)
		outs := map[string]string{}
		b, _ := os.ReadFile(outFile)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				outs[k] = v
			}
		}
		r.outputs[s.ID] = outs
		if b, _ := os.ReadFile(pathFile); len(b) > 0 {
			for _, p := range strings.Fields(string(b)) {
				path = p + ":" + path
			}
		}
		if o.Code != 0 {
			r.failed, r.code = "step "+strings.TrimSpace(s.ID+" "+strings.Split(s.Run, "\n")[0]), o.Code
		}
	}
	return r
}

// sarifResults reads a SARIF log's results' rule ids.
func sarifResults(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the SARIF log the upload step would send: %v", err)
	}
	var log struct {
		Version string
		Runs    []struct{ Results []struct{ RuleID string } }
	}
	if err := json.Unmarshal(data, &log); err != nil || log.Version != "2.1.0" || len(log.Runs) != 1 {
		t.Fatalf("%s is not a SARIF 2.1.0 log with one run: %v\n%s", file, err, data)
	}
	var ids []string
	for _, r := range log.Runs[0].Results {
		ids = append(ids, r.RuleID)
	}
	return ids
}

// TestAction runs the GitHub Action's steps (action.yml) as a runner would: on the built-in
// catalog (bundles/) lint is clean, the SARIF log to upload has no results and the job passes; on a
// bundle with an error the log holds the finding and the job fails after the upload; an input that
// is shell syntax stays a path (nothing it says runs).
func TestAction(t *testing.T) {
	fixture.Need(t, "go", "bash")
	root, _ := filepath.Abs("../../")

	t.Run("catalog", func(t *testing.T) {
		r := runAction(t, root, map[string]string{"path": "bundles", "sarif-file": filepath.Join(t.TempDir(), "catalog.sarif")})
		if r.failed != "" || r.outputs["lint"]["exit-code"] != "0" {
			t.Fatalf("the action on the catalog failed at %s (exit %d, lint %q):\n%s", r.failed, r.code, r.outputs["lint"]["exit-code"], r.log.String())
		}
		if ids := sarifResults(t, r.uploaded); len(ids) != 0 {
			t.Errorf("the catalog's SARIF log has findings %v", ids)
		}
	})

	t.Run("findings fail the job after the upload", func(t *testing.T) {
		dir := t.TempDir()
		if out, err := exec.Command("cp", "-r", "../../cmd/clihostctl/testdata/tree/.cli", dir+"/.cli").CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		r := runAction(t, dir, nil) // the defaults: .cli, clihost-lint.sarif
		if r.outputs["lint"]["exit-code"] != "1" || r.code != 1 || !strings.Contains(r.failed, "Fail on lint findings") && !strings.Contains(r.failed, "CLIHOST_LINT_EXIT") {
			t.Errorf("want lint exit 1 and the last step failing the job with it; got lint %q, failed %q exit %d\n%s",
				r.outputs["lint"]["exit-code"], r.failed, r.code, r.log.String())
		}
		if ids := sarifResults(t, r.uploaded); len(ids) == 0 {
			t.Errorf("the SARIF log to upload has no results for a bundle with an error")
		}
		if !strings.Contains(r.log.String(), "::error file=") {
			t.Errorf("no ::error annotation in the lint step's log:\n%s", r.log.String())
		}
	})

	t.Run("hostile input", func(t *testing.T) {
		dir := t.TempDir()
		marker := filepath.Join(dir, "pwned")
		r := runAction(t, dir, map[string]string{"path": `$(touch ` + marker + `) ;touch${IFS}` + marker + ` --format=text`})
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the path input ran a command:\n%s", r.log.String())
		}
		if r.outputs["lint"]["sarif-file"] != "" {
			t.Errorf("lint could not run, yet the action would upload %q", r.outputs["lint"]["sarif-file"])
		}
		if r.outputs["lint"]["exit-code"] != "2" || r.code == 0 {
			t.Errorf("paths that do not exist: want lint exit 2 and a failed job, got lint %q, exit %d\n%s", r.outputs["lint"]["exit-code"], r.code, r.log.String())
		}
	})
}
