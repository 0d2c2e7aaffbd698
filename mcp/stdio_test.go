package mcp

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveLines runs s over FinishInFlight(an IOTransport) fed with lines, closes its input once the
// first response (initialize's) has come back, and returns everything the server wrote after it
// and Run's error. It fails the test when Run does not return within 10s.
func serveLines(t *testing.T, s *sdk.Server, lines ...string) (string, error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(context.Background(), FinishInFlight(&sdk.IOTransport{Reader: inR, Writer: outW}))
		outW.Close()
	}()
	go func() {
		for _, l := range lines {
			if _, err := inW.Write([]byte(l + "\n")); err != nil {
				return
			}
		}
	}()
	sc := bufio.NewScanner(outR)
	if !sc.Scan() {
		t.Fatal("no initialize response")
	}
	time.Sleep(100 * time.Millisecond) // the later lines are read and the call started
	inW.Close()
	var rest []string
	got := make(chan struct{})
	go func() {
		for sc.Scan() {
			rest = append(rest, sc.Text())
		}
		close(got)
	}()
	select {
	case err := <-done:
		<-got
		return strings.Join(rest, "\n"), err
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end after its input closed")
		return "", nil
	}
}

var handshake = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"0"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
}

// TestFinishInFlightAnswersAfterEOF: a call still running when the input ends is answered.
func TestFinishInFlightAnswersAfterEOF(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "0"}, nil)
	s.AddTool(&sdk.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		select {
		case <-time.After(500 * time.Millisecond):
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "finished"}}}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	out, _ := serveLines(t, s, append(handshake, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)...)
	if !strings.Contains(out, `"id":2`) || !strings.Contains(out, "finished") {
		t.Fatalf("the call in flight was not answered after EOF: %q", out)
	}
}

// TestFinishInFlightEndsWhenTheServerAsks: a call waiting for the client's answer (an elicitation)
// when the input ends cannot get one: the server ends at once instead of waiting for it.
func TestFinishInFlightEndsWhenTheServerAsks(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "0"}, nil)
	s.AddTool(&sdk.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		time.Sleep(300 * time.Millisecond) // after the input closed
		_, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "ok?", RequestedSchema: map[string]any{"type": "object"}})
		return nil, err
	})
	start := time.Now()
	if _, err := serveLines(t, s, append(handshake, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{}}}`)...); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Logf("Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the server waited %v for an answer that cannot come", d)
	}
}
