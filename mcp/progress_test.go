package mcp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

func sleepHost(t *testing.T) *host.Host {
	t.Helper()
	return host.New(fixture.Registry(t, fixture.Sleep(60000)), host.Options{ProgressEvery: 50 * time.Millisecond})
}

func TestProgressNotifications(t *testing.T) {
	fixture.Need(t, "sleep")
	h := sleepHost(t)
	b, err := h.Bundle("sleep")
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int32
	ctx := context.Background()
	c := fixture.MCPClient(t, NewServer(h, b, Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}}), &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) { got.Add(1) },
	})
	params := &sdk.CallToolParams{Name: "nap", Arguments: map[string]any{"s": "0.6"}}
	params.SetProgressToken("tok")
	res, err := c.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if got.Load() == 0 {
		t.Fatal("no progress notification during a 0.6 s call")
	}
}

// TestCancellationKillsTheProcess cancels a call from the client and checks the CLI process is gone.
func TestCancellationKillsTheProcess(t *testing.T) {
	fixture.Need(t, "sleep")
	h := sleepHost(t)
	c := connect(t, h, "sleep", Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}})
	const marker = "31.4159"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.CallTool(ctx, &sdk.CallToolParams{Name: "nap", Arguments: map[string]any{"s": marker}})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !sleeping(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the sleep process never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	for sleeping(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the process outlived the cancelled call")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleeping reports whether a process with marker in its command line exists.
func sleeping(marker string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), marker) {
			return true
		}
	}
	return false
}
