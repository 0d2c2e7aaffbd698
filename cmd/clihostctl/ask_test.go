package main

import (
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
)

func TestClassifyEnvelope(t *testing.T) {
	one := 1
	cases := []struct {
		e    host.Error
		want string
	}{
		{host.Error{Code: "not_installed", Message: "claude is not installed"}, output.CategoryNotFound},
		{host.Error{Code: "version_mismatch"}, output.CategoryConfiguration},
		{host.Error{Code: "sandbox_unavailable"}, output.CategoryConfiguration},
		{host.Error{Code: "auth_required", ExitCode: &one}, output.CategoryAuthentication},
		{host.Error{Code: "input_invalid"}, output.CategoryValidation},
		{host.Error{Code: "timeout", ExitCode: &one}, output.CategoryTimeout},
		{host.Error{Code: "not_found"}, output.CategoryConfiguration}, // the bundle has no such tool
		{host.Error{Code: "upstream_error", ExitCode: &one, Stderr: "Error: 503 service_unavailable"}, output.CategoryServer},
		{host.Error{Code: "upstream_error", ExitCode: &one, Message: "the command exited with code 1"}, output.CategoryUnknown},
		{host.Error{Code: "usage_error", ExitCode: &one, Stderr: "unknown option"}, output.CategoryValidation},
	}
	for _, c := range cases {
		if got := classifyEnvelope(&c.e); got.Category != c.want {
			t.Errorf("%+v: %s, want %s", c.e, got.Category, c.want)
		}
	}
}

func TestRetryWait(t *testing.T) {
	o := &askOptions{backoff: 100 * time.Millisecond, maxWait: time.Second}
	for _, c := range []struct {
		ms   int64
		n    int
		want time.Duration
	}{{0, 1, 100 * time.Millisecond}, {0, 3, 400 * time.Millisecond}, {0, 10, time.Second}, {250, 1, 250 * time.Millisecond}, {30000, 1, time.Second}} {
		if got := retryWait(&output.ProviderError{RetryAfterMS: c.ms}, c.n, o); got != c.want {
			t.Errorf("retry after %d, attempt %d: %s, want %s", c.ms, c.n, got, c.want)
		}
	}
}

func TestProviderSpec(t *testing.T) {
	b := &manifest.Bundle{CLI: &manifest.CLI{Metadata: map[string]any{"provider": map[string]any{"tool": "chat", "format": "json"}}}}
	if spec, ok := output.ProviderOf(b); !ok || spec.Tool != "chat" || spec.Format != "json" {
		t.Fatalf("%+v %v", spec, ok)
	}
	if spec, ok := output.ProviderOf(&manifest.Bundle{CLI: &manifest.CLI{}}); ok || spec.Tool != "ask" || spec.Format != "text" {
		t.Fatalf("defaults: %+v %v", spec, ok)
	}
}

func TestOutputCommands(t *testing.T) {
	run := func(stdin string, args ...string) (string, error) {
		ios, out, _ := testStreams(stdin)
		cmd := newRootCmd(newGlobalOptions(ios))
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run(`{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`, "output", "parse", "--format", "json")
	if err != nil || !strings.Contains(out, `"content": "hi"`) || !strings.Contains(out, `"input_tokens": 3`) || !strings.Contains(out, `"estimated": false`) {
		t.Fatalf("parse: %v\n%s", err, out)
	}
	out, err = run("", "output", "classify", "--exit-code", "124")
	if err != nil || !strings.Contains(out, `"category": "timeout"`) || !strings.Contains(out, `"retry_after_ms": null`) {
		t.Fatalf("classify: %v\n%s", err, out)
	}
	if _, err := run("x", "ask", "--providers", "a", "--max-attempts", "0", "q"); err == nil {
		t.Fatal("--max-attempts 0 accepted")
	}
}
