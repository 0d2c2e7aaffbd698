package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
)

// Fixture bounds: a bundle's testdata/ is copied into every example's workspace, and a bundle is
// untrusted.
const (
	maxFixtureBytes = 64 << 20
	maxFixtureFiles = 10000
)

// fixtureUID is who owns an example's workspace when clihostctl runs as root: nobody, so that the
// CLI runs as nobody (a root host runs a CLI as its workspace's owner, never as root).
const fixtureUID = 65534

type testOptions struct {
	*globalOptions
	hostOptions
	bundle  string
	json    bool
	format  string
	network bool
}

// testResult is one example's outcome.
type testResult struct {
	Tool    string            `json:"tool"`
	Example string            `json:"example"`
	Status  string            `json:"status"` // pass, fail or skip
	Reason  string            `json:"reason,omitempty"`
	Want    any               `json:"want,omitempty"`
	Got     any               `json:"got,omitempty"`
	Error   *callresult.Error `json:"error,omitempty"`
	MS      int64             `json:"ms"`
}

// testReport is what clihostctl test --json prints.
type testReport struct {
	Bundle  string       `json:"bundle"`
	Results []testResult `json:"results"`
	Passed  int          `json:"passed"`
	Failed  int          `json:"failed"`
	Skipped int          `json:"skipped"`
}

// newTestCmd is clihostctl test.
func newTestCmd(g *globalOptions) *cobra.Command {
	o := &testOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "test BUNDLE",
		Short: "Run each TOOL.md's examples in a fixture workspace and check their results",
		Long: `Test runs every example of every TOOL.md of BUNDLE (an id, or the path of a bundle folder) as a
real call: in clihost's kernel sandbox, in a fresh temporary workspace. The workspace starts as a
copy of the tool's testdata/ folder (tools/<tool>/testdata/), else of the bundle's testdata/ (next
to CLI.md), else empty; a name dot-NAME in it is copied as .NAME (a .git folder ships as
dot-git, as go:embed leaves out names starting with "."). An example passes when the call succeeds (its value then matches the tool's
outputs schema, which every call checks) and, when the example has an output, the value equals it
(JSON values compared as values; a text output compared without trailing newlines). An example
of a tool that waits for an approval is skipped, and so, unless --network is given, is one of a
tool that needs the network: its sandbox allows egress, or its bundle's does and no fixture folder
ships for it.
Exit status: 0 when no example failed, 1 when one did, 2 on bad usage.`,
		Example: `  clihostctl test jq
  clihostctl test ./bundles/rg --format tap
  clihostctl test --bundles ./bundles git --json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bundle = args[0]
			format, err := jsonFormat(cmd, o.json, o.format, "json")
			if err != nil {
				return err
			}
			o.format, o.json = format, format == "json"
			return runTest(o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the results as JSON (the same as --format json)")
	cmd.Flags().StringVar(&o.format, "format", "text", "text (one line per example), tap (Test Anything Protocol) or json")
	cmd.Flags().BoolVar(&o.network, "network", false, "also call the tools whose sandbox allows egress (their examples need the network)")
	o.addFlags(cmd.Flags())
	_ = cmd.Flags().MarkHidden("workspace") // each example gets a workspace of its own
	return cmd
}

func runTest(o *testOptions) error {
	if o.format != "text" && o.format != "tap" && o.format != "json" {
		return usageError{fmt.Errorf("unknown --format %q: use text, tap or json", o.format)}
	}
	if st, err := os.Stat(filepath.Join(o.bundle, "CLI.md")); err == nil && st.Mode().IsRegular() {
		o.bundleDirs = []string{o.bundle} // a bundle folder named by its path
		o.bundle = ""
	}
	h, b, caller, closeFn, err := o.openTestBundle()
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	files, release, err := b.Files()
	if err != nil {
		return fmt.Errorf("bundle %s's folder: %w", b.Key(), err)
	}
	defer release()
	rep := testReport{Bundle: b.Key(), Results: []testResult{}}
	for _, t := range b.Tools {
		if t.Tool == nil {
			continue
		}
		for _, ex := range t.Tool.Examples {
			r := testResult{Tool: t.CommandPath(), Example: ex.Name, Want: ex.Output, Status: "skip"}
			if r.Reason = needsNetwork(b, t, files); r.Reason == "" || o.network {
				r = runExample(ctx, h, b, t, ex, files, caller)
			}
			rep.count(r.Status)
			rep.Results = append(rep.Results, r)
		}
	}
	if err := printTestReport(o, &rep); err != nil {
		return err
	}
	if rep.Failed > 0 {
		return exitError{1}
	}
	return nil
}

// openTestBundle opens a host over the configured bundles and the bundle to test (the only one
// loaded, when it was named by its path).
func (o *testOptions) openTestBundle() (*host.Host, *manifest.Bundle, host.Caller, func(), error) {
	if o.bundle != "" {
		return o.openBundle(o.globalOptions, o.bundle)
	}
	reg, err := o.registry()
	if err != nil {
		return nil, nil, host.Caller{}, nil, err
	}
	var ids []string
	for _, b := range reg.Bundles() {
		if b.OSDir != "" {
			ids = append(ids, b.Key())
		}
	}
	if len(ids) != 1 {
		return nil, nil, host.Caller{}, nil, fmt.Errorf("%s holds %d bundles; name one", o.bundleDirs[0], len(ids))
	}
	return o.openBundle(o.globalOptions, ids[0])
}

func (r *testReport) count(status string) {
	switch status {
	case "pass":
		r.Passed++
	case "fail":
		r.Failed++
	default:
		r.Skipped++
	}
}

// needsNetwork says why t's examples need the network, "" when they run offline: t's sandbox allows
// egress, or its bundle's does and no fixture folder ships for t (a fixture says the examples run
// offline; without one, a tool that narrowed egress away still reads the network's state, a
// cluster's kubeconfig or a chart repository's index).
func needsNetwork(b *manifest.Bundle, t *manifest.ToolEntry, files fs.FS) string {
	const hint = "; --network calls it"
	if eff := manifest.EffectiveSandbox(b.CLI.Sandbox, t.Tool.Sandbox); eff.Network != nil && len(eff.Network.Egress) > 0 {
		return "the tool needs the network (egress: " + strings.Join(eff.Network.Egress, ", ") + ")" + hint
	}
	n := b.CLI.Sandbox.Network
	if n == nil || len(n.Egress) == 0 {
		return ""
	}
	for _, dir := range fixtureDirs(t) {
		if st, err := fs.Stat(files, dir); err == nil && st.IsDir() {
			return ""
		}
	}
	return "the bundle needs the network (egress: " + strings.Join(n.Egress, ", ") + ") and ships no fixture for the tool's examples" + hint
}

// runExample calls t with ex's input in a fresh fixture workspace and judges the result.
func runExample(ctx context.Context, h *host.Host, b *manifest.Bundle, t *manifest.ToolEntry, ex manifest.ToolExample, files fs.FS, caller host.Caller) testResult {
	r := testResult{Tool: t.CommandPath(), Example: ex.Name, Want: ex.Output}
	ws, err := os.MkdirTemp("", "clihost-test-")
	if err != nil {
		return r.failed("a fixture workspace: " + err.Error())
	}
	defer os.RemoveAll(ws)
	if err := seedFixture(ws, files, fixtureDirs(t)); err != nil {
		return r.failed("the fixture workspace: " + err.Error())
	}
	input, err := exampleInput(ex.Input)
	if err != nil {
		return r.failed("the example's input: " + err.Error())
	}
	caller.Workspace = ws
	env := h.Call(ctx, b, t.Tool.ID, input, caller, host.CallOptions{Via: approval.ViaCLI, Debug: true})
	r.MS, r.Got = env.MS, env.Value
	switch {
	case env.Error != nil && env.Error.Code == errcode.ApprovalRequired:
		r.Status, r.Reason = "skip", "the tool waits for an approval (approval: "+t.Tool.Approval+")"
	case env.Error != nil:
		r.Error = env.Error
		return r.failed(fmt.Sprintf("%s: %s", env.Error.Code, env.Error.Message))
	case ex.Output != nil && !sameOutput(ex.Output, env.Value):
		return r.failed("the value differs from the example's output")
	default:
		r.Status = "pass"
	}
	return r
}

func (r testResult) failed(reason string) testResult {
	r.Status, r.Reason = "fail", reason
	return r
}

// exampleInput is an example's input as a call decodes an agent's (every digit kept).
func exampleInput(v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return argv.DecodeInput(raw)
}

// sameOutput compares an example's output with a call's value as JSON values; two strings without
// their trailing newlines.
func sameOutput(want, got any) bool {
	if ws, ok := want.(string); ok {
		gs, ok := got.(string)
		return ok && strings.TrimRight(ws, "\n") == strings.TrimRight(gs, "\n")
	}
	return reflect.DeepEqual(normalJSON(want), normalJSON(got))
}

// normalJSON is v through a JSON round trip (numbers as float64, maps as map[string]any).
func normalJSON(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(raw, &out) != nil {
		return v
	}
	return out
}

// fixtureDirs are the folders of the bundle an example's workspace is seeded from, the first that
// exists: the tool's testdata/, then the bundle's.
func fixtureDirs(t *manifest.ToolEntry) []string {
	return []string{path.Join(path.Dir(path.Clean(t.Ref)), "testdata"), "testdata"}
}

// seedFixture copies the first of dirs that exists in files into ws (regular files and folders
// only, within the fixture bounds), then, when clihostctl runs as root, gives ws to nobody.
func seedFixture(ws string, files fs.FS, dirs []string) error {
	for _, dir := range dirs {
		st, err := fs.Stat(files, dir)
		if err != nil || !st.IsDir() {
			continue
		}
		if err := copyFixture(ws, files, dir); err != nil {
			return err
		}
		break
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return filepath.WalkDir(ws, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, fixtureUID, fixtureUID)
	})
}

// copyFixture copies dir of files into ws: folders and regular files; anything else (a symbolic
// link, a device) is refused. A name dot-NAME is copied as .NAME (fixtureName).
func copyFixture(ws string, files fs.FS, dir string) error {
	var total int64
	var count int
	return fs.WalkDir(files, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := fixtureName(strings.TrimPrefix(strings.TrimPrefix(p, dir), "/"))
		if err != nil {
			return err
		}
		dst := filepath.Join(ws, filepath.FromSlash(rel))
		if count++; count > maxFixtureFiles {
			return fmt.Errorf("%s holds more than %d files", dir, maxFixtureFiles)
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o700)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file or a folder", p)
		}
		n, err := copyFixtureFile(dst, files, p, maxFixtureBytes-total)
		total += n
		return err
	})
}

// fixturePrefix starts a fixture name that is copied with a leading dot instead: go:embed leaves
// out names starting with "." or "_", so a catalog bundle ships a .git folder as dot-git.
const fixturePrefix = "dot-"

// fixtureName is the workspace path of the fixture path rel (slash-separated): each element
// dot-NAME becomes .NAME (a bare "dot-" stays as it is). dot-. would be "..", a way out of the
// workspace: it is refused.
func fixtureName(rel string) (string, error) {
	elems := strings.Split(rel, "/")
	for i, e := range elems {
		if name, ok := strings.CutPrefix(e, fixturePrefix); ok && name != "" {
			if name == "." {
				return "", fmt.Errorf("%s: %s%s would be copied as \"..\"", rel, fixturePrefix, name)
			}
			elems[i] = "." + name
		}
	}
	return strings.Join(elems, "/"), nil
}

// copyFixtureFile copies the regular file p of files to dst, at most limit bytes.
func copyFixtureFile(dst string, files fs.FS, p string, limit int64) (int64, error) {
	f, err := files.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file", p)
	}
	// os.Root keeps symbolic links in the bundle but not hard links: a file with another name
	// may be any file of the host on the same file system.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return 0, fmt.Errorf("%s is a hard link (%d names): a fixture file must have only its own name (copy it)", p, sys.Nlink)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(f, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("the fixture is larger than %d bytes", maxFixtureBytes)
	}
	return n, err
}

// printTestReport writes rep as JSON, TAP or text lines, the summary last.
func printTestReport(o *testOptions, rep *testReport) error {
	w := o.io.Out
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if o.format == "tap" {
		fmt.Fprintf(w, "TAP version 13\n1..%d\n", len(rep.Results))
	}
	for i, r := range rep.Results {
		if o.format == "tap" {
			printTAP(w, i+1, r)
			continue
		}
		printTestLine(w, r)
	}
	if len(rep.Results) == 0 {
		fmt.Fprintf(o.io.ErrOut, "%s: no tool has examples\n", rep.Bundle)
		return nil
	}
	fmt.Fprintf(o.io.ErrOut, "%s: %d passed, %d failed, %d skipped\n", rep.Bundle, rep.Passed, rep.Failed, rep.Skipped)
	return nil
}

// printTestLine is gh's style: a mark, the tool and example, the time; a failure's reason below.
func printTestLine(w io.Writer, r testResult) {
	mark := map[string]string{"pass": "✓", "fail": "X", "skip": "-"}[r.Status]
	fmt.Fprintf(w, "%s %s: %s (%s)\n", mark, r.Tool, r.Example, time.Duration(r.MS)*time.Millisecond)
	if r.Status != "pass" {
		fmt.Fprintf(w, "    %s\n", r.Reason)
	}
	printDetails(w, r, "    ")
}

// printTAP writes one TAP test line, with a YAML-ish diagnostic block for a failure.
func printTAP(w io.Writer, n int, r testResult) {
	desc := strings.NewReplacer("#", "", "\n", " ").Replace(r.Tool + ": " + r.Example)
	switch r.Status {
	case "pass":
		fmt.Fprintf(w, "ok %d - %s\n", n, desc)
	case "skip":
		fmt.Fprintf(w, "ok %d - %s # SKIP %s\n", n, desc, r.Reason)
	default:
		fmt.Fprintf(w, "not ok %d - %s\n  ---\n  message: %s\n", n, desc, jsonText(r.Reason))
		printDetails(w, r, "  ")
		fmt.Fprintln(w, "  ...")
	}
}

// printDetails writes a failure's expected and actual values and, when the CLI's output could not
// be used, what it printed (redacted).
func printDetails(w io.Writer, r testResult, indent string) {
	if r.Status != "fail" {
		return
	}
	if r.Got != nil {
		fmt.Fprintf(w, "%swant: %s\n%sgot:  %s\n", indent, jsonText(r.Want), indent, jsonText(r.Got))
	}
	if r.Error != nil && r.Error.Hint != "" {
		fmt.Fprintf(w, "%shint: %s\n", indent, r.Error.Hint)
	}
	if r.Error != nil && r.Error.Debug != nil {
		fmt.Fprintf(w, "%sstdout: %s\n%sstderr: %s\n", indent, jsonText(r.Error.Debug.Stdout), indent, jsonText(r.Error.Debug.Stderr))
	}
}

// jsonText is v as one line of JSON.
func jsonText(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
