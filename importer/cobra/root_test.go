package cobra

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// TestImportRootCommandAndReview imports sitegen, shaped like hugo: the root command runs and has
// subcommands. The program itself becomes a tool (before, only its subcommands did, and hugo's
// build was missing); --env-set reaches the CLI; server, deploy and delete are imported with the
// risk, approval and mutates they need and flagged for review (a tool-review warning per tool, and
// nothing else).
func TestImportRootCommandAndReview(t *testing.T) {
	bin := buildFixture(t, "sitegen")
	b, reg, dir := importTo(t, Options{Bin: bin, EnvSet: map[string]string{"SITEGEN_ENV": "production"}, Egress: []string{"deploy.example.com"}})
	var paths []string
	for _, tl := range b.Tools {
		paths = append(paths, strings.Join(tl.Path, " "))
	}
	if want := []string{"", "delete", "deploy", "list", "server"}; !reflect.DeepEqual(paths, want) {
		t.Fatalf("tools %q, want %q", paths, want)
	}
	rb, err := reg.Get("sitegen")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		risk     int
		approval string
		mutates  []string
		review   string
	}{
		"sitegen": {1, "", nil, ""},
		"list":    {0, "", nil, ""},
		"delete":  {3, "always", nil, "deletes or destroys"},
		"deploy":  {2, "on-mutate", []string{"network:*"}, "reaches only deploy.example.com"},
		"server":  {2, "always", nil, "runs until it is stopped"},
	}
	reviewed := map[string]bool{}
	for _, f := range rb.Findings {
		if f.Rule != "tool-review" || f.Severity != manifest.SeverityWarning {
			t.Errorf("finding %s", f)
		}
		reviewed[filepath.Base(filepath.Dir(f.Pos.File))] = true
	}
	for name, w := range want {
		e := rb.Tool(name)
		if e == nil || e.Tool == nil {
			t.Fatalf("no tool %s", name)
		}
		tl := e.Tool
		note, _ := tl.Metadata[manifest.ReviewKey].(string)
		if tl.RiskLevel != w.risk || tl.Approval != w.approval || !slices.Equal(tl.Mutates, w.mutates) || !strings.Contains(note, w.review) || reviewed[name] != (w.review != "") {
			t.Errorf("%s: risk %d approval %q mutates %v review %q (warned %v)", name, tl.RiskLevel, tl.Approval, tl.Mutates, note, reviewed[name])
		}
	}
	cli, err := os.ReadFile(filepath.Join(dir, "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cli), "SITEGEN_ENV: production") || !strings.Contains(string(cli), "sitegen: ./tools/sitegen/TOOL.md") {
		t.Errorf("CLI.md:\n%s", cli)
	}

	h := host.New(reg, host.Options{})
	hb, err := h.Bundle("sitegen")
	if err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), hb, "sitegen", map[string]any{"destination": "out", "minify": true}, host.Caller{Workspace: fixture.Workspace(t)}, host.CallOptions{})
	if !env.OK {
		t.Fatalf("sitegen: %+v", env.Error)
	}
	var got struct {
		Argv []string
		Env  string
	}
	if err := json.Unmarshal([]byte(env.Value.(string)), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Argv, []string{"--destination=out", "--minify"}) || got.Env != "production" {
		t.Errorf("the program's own tool ran %+v", got)
	}
}

// TestImportHugo imports Debian's hugo, whose root command builds the site, and builds a small
// site in a workspace through the imported "hugo" tool, in the sandbox.
func TestImportHugo(t *testing.T) {
	fixture.Slow(t)
	need(t, "hugo")
	b, reg, _ := importTo(t, Options{Bin: "hugo", WriteWorkspace: true})
	if toolByPath(b, "") == nil || toolByPath(b, "server") == nil {
		t.Fatal("hugo's build (its root command) or server is missing")
	}
	ws := fixture.Workspace(t)
	fixture.WriteIn(t, ws, map[string]string{
		"config.toml":                  "baseURL = 'https://example.org/'\ntitle = 'x'\ndisableKinds = ['taxonomy', 'term', 'RSS', 'sitemap', 'robotsTXT', '404']\n",
		"layouts/index.html":           "<h1>{{ .Site.Title }}</h1>{{ range .Site.RegularPages }}<p>{{ .Title }}</p>{{ end }}",
		"layouts/_default/single.html": "{{ .Content }}",
		"content/hello.md":             "---\ntitle: Hello\n---\nhi\n",
	})
	fixture.GiveToAgent(t, ws)
	h := host.New(reg, host.Options{})
	hb, err := h.Bundle(b.ID)
	if err != nil {
		t.Fatal(err)
	}
	env := h.Call(context.Background(), hb, "hugo", map[string]any{"destination": "public", "quiet": true}, host.Caller{Workspace: ws}, host.CallOptions{})
	if !env.OK {
		t.Fatalf("hugo: %+v", env.Error)
	}
	index, err := os.ReadFile(filepath.Join(ws, "public", "index.html"))
	if err != nil || !strings.Contains(string(index), "<p>Hello</p>") {
		t.Fatalf("public/index.html: %q %v", index, err)
	}
}
