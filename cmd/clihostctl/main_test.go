package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runCtl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ios, out, errb := testStreams("")
	code = run(args, newGlobalOptions(ios))
	return code, out.String(), errb.String()
}

// copyTree copies testdata/tree into a temp dir so tests can edit it.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk("testdata/tree", func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/tree", p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

var findingLine = regexp.MustCompile(`^(\S+):(\d+):(\d+): (error|warning): ([a-z0-9-]+): .+ \(.+\)$`)

func TestLintText(t *testing.T) {
	code, out, errOut := runCtl(t, "lint", "testdata/tree")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (an error); stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := map[string]string{
		"install-no-checksum":        "testdata/tree/.cli/mini/CLI.md:9:7: warning",
		"sandbox-glob-unenforceable": "testdata/tree/.cli/mini/CLI.md:13:16: error",
	}
	for _, l := range lines {
		m := findingLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not path:line:col: severity: rule: message (hint)", l)
		}
		if prefix, ok := want[m[5]]; ok && strings.HasPrefix(l, prefix) {
			delete(want, m[5])
		}
	}
	if len(want) != 0 {
		t.Fatalf("missing findings %v in:\n%s", want, out)
	}
	if !strings.Contains(errOut, "1 bundle(s), 1 tool(s): 1 error(s), 1 warning(s)") {
		t.Fatalf("summary missing: %q", errOut)
	}
}

func TestLintStrictAndFormats(t *testing.T) {
	dir := copyTree(t)
	cli := filepath.Join(dir, ".cli", "mini", "CLI.md")
	data, _ := os.ReadFile(cli)
	fixed := strings.Replace(string(data), `"**/*.txt"`, `"./**"`, 1)
	if err := os.WriteFile(cli, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCtl(t, "lint", dir); code != 0 || !strings.Contains(out, "install-no-checksum") {
		t.Fatalf("warnings only: exit %d, out %s", code, out)
	}
	if code, _, _ := runCtl(t, "lint", "--strict", dir); code != 1 {
		t.Fatalf("--strict with a warning: exit %d, want 1", code)
	}

	code, out, _ := runCtl(t, "lint", "--format", "json", dir)
	var rep struct {
		Findings []struct {
			Pos struct {
				File      string
				Line, Col int
			}
			Severity string
			Rule     string
		}
		Errors, Warnings int
		Bundles          []struct{ Key string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("json: exit %d, %v\n%s", code, err, out)
	}
	if rep.Warnings != 1 || rep.Errors != 0 || rep.Bundles[0].Key != "mini@1" || rep.Findings[0].Pos.Line != 9 {
		t.Fatalf("json report = %+v", rep)
	}

	_, out, _ = runCtl(t, "lint", "--format", "sarif", dir)
	var sarif struct {
		Version string
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string
					Rules []struct{ ID string }
				}
			}
			Results []struct {
				RuleID    string
				Level     string
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           struct{ StartLine, StartColumn int }
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &sarif); err != nil {
		t.Fatal(err)
	}
	r := sarif.Runs[0]
	if sarif.Version != "2.1.0" || r.Tool.Driver.Name != "clihostctl" || len(r.Results) != 1 || r.Results[0].RuleID != "install-no-checksum" ||
		r.Results[0].Level != "warning" || r.Results[0].Locations[0].PhysicalLocation.Region.StartLine != 9 || r.Tool.Driver.Rules[0].ID != "install-no-checksum" {
		t.Fatalf("sarif = %s", out)
	}

	_, out, _ = runCtl(t, "lint", "--format", "github", dir)
	if !regexp.MustCompile(`^::warning file=.*CLI\.md,line=9,col=7,title=install-no-checksum::download entry without verify_sha256`).MatchString(out) {
		t.Fatalf("github format = %q", out)
	}
}

func TestUsageErrors(t *testing.T) {
	if code, _, errOut := runCtl(t, "lint", "--format", "xml", "testdata/tree"); code != 2 || !strings.Contains(errOut, "unknown --format") {
		t.Fatalf("bad format: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCtl(t, "lint", "--nope"); code != 2 {
		t.Fatalf("unknown flag: exit %d", code)
	}
	if code, _, errOut := runCtl(t, "inspect"); code != 2 || !strings.Contains(errOut, "takes 1 argument") {
		t.Fatalf("inspect without a bundle: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCtl(t, "lint", "does-not-exist"); code != 2 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing path: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCtl(t, "inspect", "--bundles", "testdata/tree", "nosuch"); code != 1 || !strings.Contains(errOut, `no bundle "nosuch"`) {
		t.Fatalf("unknown bundle: exit %d, %q", code, errOut)
	}
}

func TestCatalogLintsCleanByDefault(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./.cli here: the embedded catalog alone
	t.Setenv("CLIHOST_BUNDLES", "")
	code, out, errOut := runCtl(t, "lint", "--strict")
	if code != 0 || out != "" {
		t.Fatalf("embedded catalog: exit %d\n%s%s", code, out, errOut)
	}
}

func TestInspectAndTools(t *testing.T) {
	t.Setenv("CLIHOST_BUNDLES", "")
	code, out, errOut := runCtl(t, "inspect", "gh", "--json")
	if code != 0 {
		t.Fatalf("inspect gh: exit %d %s", code, errOut)
	}
	var in struct {
		Key   string
		CLI   struct{ Bin string }
		Tools []struct {
			Path             []string
			MCPName          string `json:"mcp_name"`
			EffectiveSandbox struct {
				Network struct{ Egress []string }
			} `json:"effective_sandbox"`
			Tool struct{ ID string }
		}
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatal(err)
	}
	if in.Key != "gh@1" || in.CLI.Bin != "gh" || len(in.Tools) < 3 {
		t.Fatalf("inspect = %+v", in)
	}
	found := false
	for _, tl := range in.Tools {
		if tl.MCPName == "pr_list" && tl.Tool.ID != "" && len(tl.EffectiveSandbox.Network.Egress) > 0 {
			found = true
		}
	}
	if _, err := exec.LookPath("jq"); err == nil {
		_, out, _ := runCtl(t, "inspect", "jq", "--json")
		var jq struct {
			Tools []struct {
				Policy *struct {
					Binary string
					Deny   []string
					Exec   []string
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &jq); err != nil || jq.Tools[0].Policy == nil || jq.Tools[0].Policy.Binary == "" || len(jq.Tools[0].Policy.Exec) < 2 || len(jq.Tools[0].Policy.Deny) == 0 {
			t.Fatalf("inspect jq policy: %v\n%.400s", err, out)
		}
	}
	if !found {
		t.Fatalf("no pr_list tool with an effective sandbox in %s", out)
	}

	code, out, _ = runCtl(t, "tools", "gh", "--json")
	var tools []struct {
		Name        string
		Description string
		InputSchema map[string]any
	}
	if err := json.Unmarshal([]byte(out), &tools); err != nil || code != 0 {
		t.Fatalf("tools: exit %d, %v", code, err)
	}
	for _, tl := range tools {
		if tl.InputSchema["type"] != "object" || !strings.Contains(tl.Description, "Runs `gh ") {
			t.Fatalf("tool %+v", tl)
		}
	}
	code, out, _ = runCtl(t, "tools", "gh")
	if code != 0 || !strings.Contains(out, "pr_list\n") {
		t.Fatalf("tools text: exit %d\n%s", code, out)
	}
	code, out, _ = runCtl(t, "inspect", "testdata/tree/.cli/mini")
	if code != 0 || !strings.Contains(out, "mini@1") || !strings.Contains(out, "findings: 1 error(s), 1 warning(s)") {
		t.Fatalf("inspect by path: exit %d\n%s", code, out)
	}
}
