package tests

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestStdioAnswersInFlightAfterStdinCloses: `clihostctl mcp` is sent a slow tools/call and then
// its stdin is closed (a client that sends its last request and hangs up its side, as `echo … |`
// does). The answer to the call must still arrive on stdout before the server exits.
func TestStdioAnswersInFlightAfterStdinCloses(t *testing.T) {
	ws := fixture.Workspace(t)
	cmd := exec.Command(bin.ctl, "mcp", "conformance", "--bundles", "testdata/conformance", "--workspace", ws)
	cmd.Env = mcpEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := fixture.Start(t, cmd)
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"drain","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{}}}`,
	} {
		if _, err := stdin.Write([]byte(m + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	if !sc.Scan() { // the initialize result: the server is serving
		t.Fatalf("no initialize result: %v", sc.Err())
	}
	time.Sleep(300 * time.Millisecond) // the call is running (it takes about 3.6 s)
	stdin.Close()
	var got struct {
		ID     int `json:"id"`
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if json.Unmarshal(sc.Bytes(), &got) == nil && got.ID == 2 {
			break
		}
	}
	if got.ID != 2 || got.Result == nil || got.Result.IsError || len(got.Result.Content) == 0 || !strings.Contains(got.Result.Content[0].Text, "done") {
		t.Fatalf("after stdin closed, the call in flight was not answered: %d lines after initialize:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if err := p.Wait(); err != nil {
		t.Errorf("clihostctl mcp after answering: %v", err)
	}
}
