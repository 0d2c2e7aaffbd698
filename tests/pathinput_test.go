package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestCatalogPathInputsStayInWorkspace calls the catalog's real rg, jq and git through `clihostctl
// call` with paths that leave the workspace: the catalog marks them `format: path`, and the host
// refuses them (path_traversal_blocked) before any CLI runs. Before, rg searched /etc/passwd. The
// control reads a file inside the workspace.
func TestCatalogPathInputsStayInWorkspace(t *testing.T) {
	fixture.Need(t, "rg", "jq", "git")
	ws := fixture.Workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "data.json"), []byte(`{"root": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ bundle, tool, input string }{
		{"rg", "search", `{"pattern": "root", "path": "../../../../../../etc/passwd"}`},
		{"rg", "files", `{"path": "/etc"}`},
		{"jq", "filter", `{"filter": ".", "files": ["data.json", "../../../../../../etc/passwd"]}`},
		{"git", "log", `{"paths": ["/etc/passwd"]}`},
		{"ffmpeg", "thumbnail", `{"input": "a/../../x.mp4", "output": "t.png"}`},
	} {
		r := runBin(t, bin.ctl, "", "call", c.bundle, c.tool, "--workspace", ws, "--audit", os.DevNull, "--input", c.input)
		if e := decodeEnvelope(t, r); r.code != 1 || e.OK || e.Error == nil || e.Error.Code != "path_traversal_blocked" {
			t.Fatalf("%s %s %s: exit %d %+v\n%s", c.bundle, c.tool, c.input, r.code, e, r.stderr)
		}
	}
	r := runBin(t, bin.ctl, "", "call", "rg", "search", "--workspace", ws, "--audit", os.DevNull, "--input", `{"pattern": "root", "path": "data.json"}`)
	if e := decodeEnvelope(t, r); r.code != 0 || !e.OK {
		t.Fatalf("control: exit %d %+v\n%s", r.code, e, r.stderr)
	}
}

// TestCatalogMorePathInputs calls the other catalog inputs that name workspace files — aws s3-cp's
// source and destination, curl download's output, yt-dlp download's output template, helm
// template's chart and values — with paths that leave the workspace. Each is marked `format:
// path` now: a value its pattern lets through (sub/../../x, a symlink out of the workspace, and
// for helm's chart ../../x and /etc) is refused with path_traversal_blocked before any CLI runs;
// before, the CLI got it. ../../etc/passwd and /etc/passwd are refused either way (input_invalid
// where the pattern refuses a leading . or /). The controls are values inside the workspace, and
// s3:// and oci:// references, which pass the path check. No call reaches past loopback: URLs
// name 127.0.0.1:1 inside the sandbox's network namespace.
func TestCatalogMorePathInputs(t *testing.T) {
	ws := fixture.Workspace(t)
	if err := os.Symlink("/etc", filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	const url = "https://127.0.0.1:1/x"
	inputs := []struct {
		bundle, tool, name, other string // other: the rest of the input object
		leadingDot                bool   // the pattern allows a leading . or /
	}{
		{"aws", "s3.cp", "source", `"destination": "s3://bucket/key"`, false},
		{"aws", "s3.cp", "destination", `"source": "s3://bucket/key"`, false},
		{"curl", "download", "output", `"url": "` + url + `"`, false},
		{"yt-dlp", "download", "output_template", `"url": "` + url + `"`, false},
		{"helm", "template", "chart", `"release": "web"`, true},
		{"helm", "template", "values", `"release": "web", "chart": "oci://registry.example/c"`, true},
	}
	for _, in := range inputs {
		for _, c := range []struct{ value, code string }{
			{"sub/../../../../../../etc/passwd", "path_traversal_blocked"},
			{"out/passwd", "path_traversal_blocked"},
			{"../../etc/passwd", map[bool]string{false: "input_invalid", true: "path_traversal_blocked"}[in.leadingDot]},
			{"/etc/passwd", "input_invalid"},
		} {
			if in.leadingDot && c.value == "/etc/passwd" {
				c.code = "input_invalid" // helm's patterns allow a leading . but not /
			}
			input := `{"` + in.name + `": "` + c.value + `", ` + in.other + `}`
			r := runBin(t, bin.ctl, "", "call", in.bundle, in.tool, "--workspace", ws, "--audit", os.DevNull, "--input", input)
			e := decodeEnvelope(t, r)
			if r.code != 1 || e.OK || e.Error == nil || e.Error.Code != c.code || e.Error.Pointer != "/"+in.name {
				t.Errorf("%s %s %s: exit %d %+v, want %s at /%s", in.bundle, in.tool, input, r.code, e.Error, c.code, in.name)
			}
		}
	}
	// yt-dlp reads "TYPE:" before a template as the kind of file it names ("infojson:/x" writes the
	// info JSON to /x), which a lexical check sees as a relative name: the pattern refuses ':'.
	r := runBin(t, bin.ctl, "", "call", "yt-dlp", "download", "--workspace", ws, "--audit", os.DevNull, "--input", `{"url": "`+url+`", "output_template": "infojson:/etc/x"}`)
	if e := decodeEnvelope(t, r); e.Error == nil || e.Error.Code != "input_invalid" || e.Error.Pointer != "/output_template" {
		t.Errorf("yt-dlp TYPE: prefix: exit %d %+v", r.code, e.Error)
	}
	// Controls: the path check lets workspace paths and remote references through; these calls
	// then fail later (no network, no credentials, CLI not installed), never on the path.
	for _, c := range []struct{ bundle, tool, input string }{
		{"aws", "s3.cp", `{"source": "sub/a.txt", "destination": "s3://bucket/key"}`},
		{"aws", "s3.cp", `{"source": "s3://bucket/key", "destination": "sub/a.txt"}`},
		{"curl", "download", `{"url": "` + url + `", "output": "sub/a.bin"}`},
		{"yt-dlp", "download", `{"url": "` + url + `", "output_template": "sub/%(id)s.%(ext)s"}`},
		{"helm", "template", `{"release": "web", "chart": "oci://registry.example/c", "values": "sub/values.yaml"}`},
	} {
		r := runBin(t, bin.ctl, "", "call", c.bundle, c.tool, "--workspace", ws, "--audit", os.DevNull, "--input", c.input)
		if e := decodeEnvelope(t, r); e.Error != nil && (e.Error.Code == "path_traversal_blocked" || e.Error.Code == "input_invalid") {
			t.Errorf("control %s %s %s: %+v", c.bundle, c.tool, c.input, e.Error)
		}
	}
}

// TestCatalogGitPathspecMagic calls the catalog's git log with pathspecs that begin with ':', git's
// pathspec magic: :(top) and :/ name the repository's top instead of the workspace, :! excludes,
// :(glob) globs. A lexical check sees a relative name in each, and before, git ran with every one
// of them (exit 0). The host now refuses a leading ':' in every
// `format: path` input (path_traversal_blocked); the control names a file called ":name" as
// ./:name, which git reads literally.
func TestCatalogGitPathspecMagic(t *testing.T) {
	fixture.Need(t, "git")
	ws := fixture.Workspace(t)
	for name, content := range map[string]string{":name": "colon\n", "etc/x": "x\n", "a.txt": "a\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "--", "./:name", "etc/x", "a.txt"}, {"commit", "-q", "-m", "files"}} {
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	fixture.GiveToAgent(t, ws)
	for _, v := range []string{":(top)../x", ":/etc", ":(glob)**", ":!a.txt", ":(exclude)a.txt", ":name"} {
		input := `{"paths": ["a.txt", "` + v + `"]}`
		r := runBin(t, bin.ctl, "", "call", "git", "log", "--workspace", ws, "--audit", os.DevNull, "--input", input)
		if e := decodeEnvelope(t, r); r.code != 1 || e.Error == nil || e.Error.Code != "path_traversal_blocked" || e.Error.Pointer != "/paths/1" {
			t.Errorf("%s: exit %d %+v\n%s", input, r.code, e.Error, r.stdout)
		}
	}
	r := runBin(t, bin.ctl, "", "call", "git", "log", "--workspace", ws, "--audit", os.DevNull, "--input", `{"paths": ["./:name"]}`)
	if e := decodeEnvelope(t, r); r.code != 0 || !e.OK || !strings.HasSuffix(e.Value.(string), "\tfiles") {
		t.Fatalf("control ./:name: exit %d %+v\n%s", r.code, e, r.stderr)
	}
}
