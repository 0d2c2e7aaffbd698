package cobramcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// demoBin builds cobramcp/internal/demo once per test binary.
var demoBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cobramcp-demo")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "demo")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/demo")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build demo: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := demoBin(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// demoSession starts the demo program in MCP mode as a real subprocess and connects the MCP Go
// SDK's client to it over its stdin and stdout.
func demoSession(t *testing.T) *sdk.ClientSession {
	t.Helper()
	bin, err := demoBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "MCP_MODE=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	c, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		if t.Failed() {
			t.Logf("demo's stderr:\n%s", stderr.String())
		}
	})
	return c
}

func call(t *testing.T, c *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestStdioCapture: a real Cobra program served over stdio whose commands write to os.Stdout and
// os.Stderr directly, write 1 MiB, start echo, panic, read stdin and leave a process behind; the
// MCP stream stays valid and each result holds its own output.
func TestStdioCapture(t *testing.T) {
	c := demoSession(t)
	if got := text(call(t, c, "demo_println", map[string]any{"words": []any{"hi", "there"}})); got != "hi there\n" {
		t.Errorf("println: %q", got)
	}
	big := text(call(t, c, "demo_big", map[string]any{}))
	if len(big) != 1<<20 || strings.Trim(big, "xy\n") != "" {
		t.Errorf("big: %d bytes, want %d", len(big), 1<<20)
	}
	if got := text(call(t, c, "demo_spawn", map[string]any{"text": "from echo"})); got != "from echo\n" {
		t.Errorf("spawn: %q", got)
	}
	res := call(t, c, "demo_panic", map[string]any{})
	if got := text(res); !res.IsError || !strings.Contains(got, "command panicked: boom") || !strings.Contains(got, "about to panic") {
		t.Errorf("panic: %+v %q", res, got)
	}
	if got := text(call(t, c, "demo_stdin", map[string]any{})); got != "read 0 bytes\n" {
		t.Errorf("stdin: %q (a command must not read the MCP session)", got)
	}
	got := text(call(t, c, "demo_background", map[string]any{}))
	if !strings.Contains(got, "from background\n") {
		t.Errorf("background: %q", got)
	}
	if pid := backgroundPID(t, got); !alive(pid) {
		t.Errorf("the call ended only after the process left holding stdout (%d) had", pid)
	}
	// After all of that, the session still works and nothing leaked into the next result.
	if got := text(call(t, c, "demo_println", map[string]any{"words": []any{"again"}})); got != "again\n" {
		t.Errorf("println after: %q", got)
	}
}

// TestStdioConcurrent: calls sent at once each get their own output, whole.
func TestStdioConcurrent(t *testing.T) {
	c := demoSession(t)
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "demo_slow",
				Arguments: map[string]any{"tag": fmt.Sprint("t", i), "ms": 20}})
			if err != nil {
				got[i] = err.Error()
				return
			}
			got[i] = text(res)
		})
	}
	wg.Go(func() { _ = text(call(t, c, "demo_big", map[string]any{"bytes": 300000})) })
	wg.Wait()
	for i, g := range got {
		if want := fmt.Sprintf("start t%d\nend t%d\n", i, i); g != want {
			t.Errorf("call %d: %q, want %q", i, g, want)
		}
	}
}

// TestStdioStreamAndChildren drives the demo with raw JSON-RPC lines: every line it writes on
// stdout is a JSON-RPC message, and when stdin closes its stdout ends at once even though a
// process a command started is still running (that process holds the call's pipe, never the
// MCP stream).
func TestStdioStreamAndChildren(t *testing.T) {
	bin, err := demoBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "MCP_MODE=true")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo_println","arguments":{"words":["a"]}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo_background","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"demo_spawn","arguments":{"text":"b"}}}`,
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var ids []any
	var background int
	for _, m := range msgs {
		fmt.Fprintln(stdin, m)
		if !strings.Contains(m, `"id"`) {
			continue
		}
		select {
		case l := <-lines:
			var msg map[string]any
			if err := json.Unmarshal([]byte(l), &msg); err != nil || msg["jsonrpc"] != "2.0" {
				t.Fatalf("not a JSON-RPC message on stdout: %q", l)
			}
			ids = append(ids, msg["id"])
			if msg["id"] == 3.0 {
				background = backgroundPID(t, l)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no answer to %s", m)
		}
	}
	if !reflect.DeepEqual(ids, []any{1.0, 2.0, 3.0, 4.0}) {
		t.Errorf("answers %v", ids)
	}
	stdin.Close()
	for l := range lines {
		t.Errorf("more on stdout: %q", l)
	}
	if !alive(background) {
		t.Errorf("stdout ended only after the background process (%d) had: it held the MCP stream", background)
	}
}

// backgroundPID is the process demo_background started, as its output (maybe JSON-quoted) names
// it ("started PID"); it is killed at t's end.
func backgroundPID(t *testing.T, out string) int {
	t.Helper()
	var pid int
	if _, after, ok := strings.Cut(out, "started "); ok {
		fmt.Sscanf(after, "%d", &pid)
	}
	if pid <= 0 {
		t.Fatalf("demo_background named no process: %q", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// alive reports whether process pid runs (not a zombie): demo_background's sleeps two minutes,
// so a call that waited for it would have ended long after.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return rest != "" && rest[0] != 'Z'
}

// TestCaptureInProcess: CaptureProcessOutput on a server in this process: what a command writes
// to os.Stdout past MaxOutputBytes is drained and dropped (the command is not blocked), stderr
// goes with a failure, and a command that replaces os.Stdout does not keep it replaced.
func TestCaptureInProcess(t *testing.T) {
	root := &cobra.Command{Use: "app"}
	root.AddCommand(&cobra.Command{Use: "flood", RunE: func(*cobra.Command, []string) error {
		_, err := os.Stdout.WriteString(strings.Repeat("z", 1<<20))
		return err
	}}, &cobra.Command{Use: "swap", RunE: func(*cobra.Command, []string) error {
		os.Stdout = os.Stderr
		fmt.Fprintln(os.Stderr, "to stderr")
		return errors.New("failed")
	}})
	realStdout := os.Stdout
	b := &bridge{root: root, opts: Options{CaptureProcessOutput: true, MaxOutputBytes: 1000}}
	res, err := b.execute(context.Background(), "app_flood", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; !strings.HasPrefix(got, strings.Repeat("z", 1000)+"\n[cobramcp: output truncated, 1047576 bytes dropped]") {
		t.Errorf("flood: %d bytes: %.80q…", len(got), got)
	}
	res, err = b.execute(context.Background(), "app_swap", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].Text, "to stderr") {
		t.Errorf("swap: %+v", res)
	}
	if os.Stdout != realStdout {
		t.Error("os.Stdout stays replaced after the call")
	}
}

// TestCaptureClosedStdout: a command that closes os.Stdout does not leave later calls without
// one, and a panic's stack goes to the Logger, not to the client.
func TestCaptureClosedStdout(t *testing.T) {
	root := &cobra.Command{Use: "app"}
	root.AddCommand(&cobra.Command{Use: "close", RunE: func(*cobra.Command, []string) error {
		fmt.Println("before")
		return os.Stdout.Close()
	}}, &cobra.Command{Use: "print", Run: func(*cobra.Command, []string) { fmt.Println("printed") }},
		&cobra.Command{Use: "panic", Run: func(*cobra.Command, []string) { panic("deep") }})
	var logged strings.Builder
	b := &bridge{root: root, opts: Options{CaptureProcessOutput: true,
		Logger: loggerFunc(func(f string, a ...any) { fmt.Fprintf(&logged, f, a...) })}}
	for _, c := range []struct{ tool, want string }{{"app_close", "before\n"}, {"app_print", "printed\n"}, {"app_print", "printed\n"}} {
		res, err := b.execute(context.Background(), c.tool, nil)
		if err != nil || res.IsError || res.Content[0].Text != c.want {
			t.Errorf("%s: %+v %v, want %q", c.tool, res, err, c.want)
		}
	}
	res, _ := b.execute(context.Background(), "app_panic", nil)
	if !res.IsError || strings.Contains(res.Content[0].Text, "goroutine") || !strings.Contains(logged.String(), "goroutine") {
		t.Errorf("panic: result %q, log %q", res.Content[0].Text, logged.String())
	}
}
