package cobra

import (
	"github.com/clihost/clihost/importer/cobra/usage"

	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/registry"
)

// need skips when a Debian binary is missing, except under CI, where it is installed.
func need(t *testing.T, bin string) string {
	t.Helper()
	fixture.Need(t, bin)
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// buildFixture builds testdata/NAME into a directory every user can read and enter, since the
// sandboxed tool runs as the workspace's owner.
func buildFixture(t *testing.T, name string) string {
	t.Helper()
	fixture.Slow(t) // builds a fixture program
	dir, err := os.MkdirTemp("", "clihost-cobra-fixture-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// importTo imports bin into a new bundle folder named id and loads it, failing on any finding.
func importTo(t *testing.T, o Options) (*Bundle, *registry.Registry, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Import(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), b.ID)
	if err := b.Write(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := fixture.Load(t, dir)
	for _, f := range reg.AllFindings() {
		if f.Rule != "tool-review" { // the importer's own request for a review
			t.Errorf("lint: %s", f)
		}
	}
	return b, reg, dir
}

func toolByPath(b *Bundle, path string) *Tool {
	for _, t := range b.Tools {
		if strings.Join(t.Path, " ") == path {
			return t
		}
	}
	return nil
}

// TestImportFixture imports the gitx fixture and checks the tree it declares: nested commands,
// hidden and deprecated commands and flags left out, persistent flags inherited, required flags,
// types and positionals.
func TestImportFixture(t *testing.T) {
	bin := buildFixture(t, "gitx")
	b, _, dir := importTo(t, Options{Bin: bin})
	if b.ID != "gitx" || b.Root != "gitx" || b.Version != "1.4.2" || b.Bin != bin {
		t.Fatalf("bundle: id %q root %q version %q bin %q", b.ID, b.Root, b.Version, b.Bin)
	}
	var paths []string
	for _, tl := range b.Tools {
		paths = append(paths, strings.Join(tl.Path, " "))
	}
	if want := []string{"log", "remote add", "remote list", "remote remove"}; !reflect.DeepEqual(paths, want) {
		t.Fatalf("tools %q, want %q (secret is hidden, legacy deprecated, help and completion skipped)", paths, want)
	}
	add := toolByPath(b, "remote add")
	types := map[string]string{}
	for _, f := range add.Flags {
		types[f.Name] = f.Type
		if !f.TypeKnown {
			types[f.Name] = "?" + f.Type
		}
		if f.Required != (f.Name == "branch") {
			t.Errorf("--%s required = %v", f.Name, f.Required)
		}
	}
	want := map[string]string{"repo": "?OWNER/REPO", "verbose": "count", "bind": "ip", "branch": "string", "depth": "int", "fetch": "bool",
		"header": "stringArray", "label": "stringToString", "max-size": "int", "mirror": "bool", "name-only": "string", "ports": "ints",
		"ratio": "float", "retries": "uint", "timeout": "duration", "track": "strings"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("flag types\n got %v\nwant %v", types, want)
	}
	if want := []usage.Arg{{Name: "name", Required: true}, {Name: "url", Required: true}}; !reflect.DeepEqual(add.Args, want) {
		t.Errorf("args %+v", add.Args)
	}
	if rm := toolByPath(b, "remote remove"); len(rm.Args) != 1 || !rm.Args[0].Variadic || !rm.Args[0].Required {
		t.Errorf("remove args %+v", rm.Args)
	}
	if b.JSONFlag != "--json" || !toolByPath(b, "remote list").JSON {
		t.Errorf("json flag %q", b.JSONFlag)
	}
	data, err := os.ReadFile(filepath.Join(dir, "tools", "remote-add", "TOOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"pattern: ^(0|-?([0-9]+", "minimum: 0", "format: ipv4", "- --track=${input.track | join(',')}", "- ${input.mirror | flag('--mirror')}", "- --fetch=${input.fetch}"} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("TOOL.md lacks %q", s)
		}
	}
	for _, s := range []string{"internal", "old:"} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("TOOL.md has the hidden or deprecated flag %q", s)
		}
	}
}

// TestImportRoundTrip calls the imported tools through host.Call, in the sandbox, and checks the
// exact argv the fixture received (it prints its os.Args[1:] as JSON).
func TestImportRoundTrip(t *testing.T) {
	bin := buildFixture(t, "gitx")
	_, reg, _ := importTo(t, Options{Bin: bin})
	// remote remove is imported with approval always: the operator's policy allows it here.
	gate := approval.NewGate(&approval.Policy{Rules: []approval.Rule{{Bundle: "gitx", Tool: "remote remove", Decision: approval.Allow}}})
	h := host.New(reg, host.Options{Approvals: gate})
	b, err := h.Bundle("gitx")
	if err != nil {
		t.Fatal(err)
	}
	ws := fixture.Workspace(t)
	cases := []struct {
		tool, input string
		want        []string
	}{
		{"remote add", `{"name": "origin", "url": "https://x/y.git", "branch": "dev"}`,
			[]string{"remote", "add", "--branch=dev", "origin", "https://x/y.git"}},
		{"remote add", `{"name": "o", "url": "u", "branch": "b", "repo": "a/b", "verbose": 2, "bind": "10.0.0.1", "depth": 3,
			"fetch": false, "header": ["A: 1", "B: 2"], "label": {"x": "y", "k": "v"}, "max-size": 9, "mirror": true, "name-only": "n",
			"ports": [80, 443], "ratio": 0.25, "retries": 5, "timeout": "1m30s", "track": ["main", "dev"]}`,
			[]string{"remote", "add", "--branch=b", "--repo=a/b", "--verbose=2", "--bind=10.0.0.1", "--depth=3", "--fetch=false",
				"--header=A: 1", "--header=B: 2", "--label=k=v", "--label=x=y", "--max-size=9", "--mirror", "--name-only=n",
				"--ports=80,443", "--ratio=0.25", "--retries=5", "--timeout=1m30s", "--track=main,dev", "o", "u"}},
		{"remote remove", `{"name": ["a", "b c", "d;e"]}`, []string{"remote", "remove", "a", "b c", "d;e"}},
		{"log", `{"revision": "HEAD~1", "path": ["-weird", "b"]}`, []string{"log", "HEAD~1", "--", "-weird", "b"}},
	}
	for _, c := range cases {
		var in map[string]any
		dec := json.NewDecoder(strings.NewReader(c.input))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil {
			t.Fatal(err)
		}
		env := h.Call(context.Background(), b, c.tool, in, host.Caller{Workspace: ws}, host.CallOptions{})
		if !env.OK {
			t.Fatalf("%s %s: %+v", c.tool, c.input, env.Error)
		}
		var got []string
		if err := json.Unmarshal([]byte(env.Value.(string)), &got); err != nil {
			t.Fatalf("%s: output %q: %v", c.tool, env.Value, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s\n got %q\nwant %q", c.tool, c.input, got, c.want)
		}
	}
	// The JSON flag is added by the host, and the output parsed as JSON.
	env := h.Call(context.Background(), b, "remote list", map[string]any{"pattern": "o*"}, host.Caller{Workspace: ws}, host.CallOptions{})
	if got, _ := json.Marshal(env.Value); !env.OK || string(got) != `["remote","list","o*","--json"]` {
		t.Errorf("remote list: %s %+v", got, env.Error)
	}
	// Input validation comes from the imported schema.
	for _, in := range []string{`{"name": "o", "url": "u"}`, `{"name": "o", "url": "u", "branch": "b", "timeout": "soon"}`,
		`{"name": "o", "url": "u", "branch": "b", "depth": "deep"}`, `{"name": "o", "url": "u", "branch": "b", "nope": 1}`,
		`{"name": "-o", "url": "u", "branch": "b"}`} {
		var m map[string]any
		_ = json.Unmarshal([]byte(in), &m)
		if env := h.Call(context.Background(), b, "remote add", m, host.Caller{Workspace: ws}, host.CallOptions{}); env.OK || env.Error.Code != "input_invalid" {
			t.Errorf("%s was not refused: %+v", in, env)
		}
	}
}

func TestImportNotCobra(t *testing.T) {
	if _, err := Import(context.Background(), Options{Bin: need(t, "true"), Timeout: 5 * time.Second}); err == nil || !strings.Contains(err.Error(), "not a Cobra program") {
		t.Fatalf("true imported: %v", err)
	}
}

// TestImportGH imports Debian's gh (gh's own help layout, backquoted value names) and calls its
// offline config list tool through the host.
func TestImportGH(t *testing.T) {
	fixture.Slow(t)
	need(t, "gh")
	b, reg, _ := importTo(t, Options{Bin: "gh", Read: []string{"~/.config/gh/**"}})
	if len(b.Tools) < 50 {
		t.Fatalf("only %d gh tools", len(b.Tools))
	}
	list := toolByPath(b, "pr list")
	if list == nil {
		t.Fatal("no pr list")
	}
	flags := map[string]*Flag{}
	for _, f := range list.Flags {
		flags[f.Name] = f
	}
	if f := flags["limit"]; f == nil || f.Type != "int" || f.Default != "30" {
		t.Errorf("--limit %+v", f)
	}
	if f := flags["repo"]; f == nil || f.TypeKnown || !f.Inherited {
		t.Errorf("--repo (inherited, backquoted value name) %+v", f)
	}
	if f := flags["label"]; f == nil || f.Type != "strings" {
		t.Errorf("--label %+v", f)
	}
	if co := toolByPath(b, "pr checkout"); co == nil || len(co.Args) != 1 || co.Args[0].Name != "number" || !co.Args[0].Required {
		t.Errorf("pr checkout args %+v", co)
	}
	h := host.New(reg, host.Options{})
	bb, err := h.Bundle(b.ID)
	if err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), bb, "config list", map[string]any{}, host.Caller{Workspace: fixture.Workspace(t)}, host.CallOptions{})
	if s, _ := env.Value.(string); !env.OK || !strings.Contains(s, "git_protocol=") {
		t.Fatalf("gh config list: %#v %+v", env.Value, env.Error)
	}
}

// TestImportKubectl imports Debian's kubectl (kubectl's help layout without type names, global
// flags only in "kubectl options", --output json) and calls two offline tools.
func TestImportKubectl(t *testing.T) {
	fixture.Slow(t)
	need(t, "kubectl")
	b, reg, _ := importTo(t, Options{Bin: "kubectl", Read: []string{"~/.kube/**"}})
	if b.JSONFlag != "--output" || !reflect.DeepEqual(b.JSONFlagArgs, []string{"json"}) {
		t.Errorf("json flag %q %q", b.JSONFlag, b.JSONFlagArgs)
	}
	get := toolByPath(b, "get")
	if get == nil || !get.JSON {
		t.Fatalf("get %+v", get)
	}
	flags := map[string]*Flag{}
	for _, f := range get.Flags {
		flags[f.Name] = f
	}
	for name, typ := range map[string]string{"all-namespaces": "bool", "chunk-size": "int", "selector": "string", "filename": "stringArray",
		"namespace": "string", "insecure-skip-tls-verify": "bool"} {
		if f := flags[name]; f == nil || f.Type != typ {
			t.Errorf("get --%s: %+v, want %s", name, f, typ)
		}
	}
	if _, ok := flags["output"]; ok {
		t.Error("get offers --output although the host sets it")
	}
	exec := toolByPath(b, "exec")
	if exec == nil {
		t.Fatal("no exec")
	}
	want := []usage.Arg{{Name: "pod", Required: true}, {Name: "command", Required: true, AfterDash: true}, {Name: "args", Variadic: true, AfterDash: true}}
	if !reflect.DeepEqual(exec.Args, want) {
		t.Errorf("exec args %+v", exec.Args)
	}
	h := host.New(reg, host.Options{})
	bb, err := h.Bundle(b.ID)
	if err != nil {
		t.Fatal(err)
	}
	ws := fixture.Workspace(t)
	env := h.Call(context.Background(), bb, "version", map[string]any{"client": true}, host.Caller{Workspace: ws}, host.CallOptions{})
	if m, _ := env.Value.(map[string]any); !env.OK || m["clientVersion"] == nil {
		t.Fatalf("kubectl version --client: %#v %+v", env.Value, env.Error)
	}
	env = h.Call(context.Background(), bb, "config view", map[string]any{}, host.Caller{Workspace: ws}, host.CallOptions{})
	if m, _ := env.Value.(map[string]any); !env.OK || m["kind"] != "Config" {
		t.Fatalf("kubectl config view: %#v %+v", env.Value, env.Error)
	}
}
