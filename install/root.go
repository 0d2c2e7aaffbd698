package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/clihost/clihost/manifest"
)

// NeedsRootError is an install entry that needs root (a system package manager) met by an
// unprivileged install. Without Options.HandOff the entry is skipped with this as its reason and
// Skip.NeedsRoot set; with HandOff, Install stops there and returns an error wrapping it.
type NeedsRootError struct {
	Index   int    // the entry's position in the bundle's install list
	Method  string // apt, dnf, pacman, pip
	Package string // the entry's package
	Tool    string // the program that needs root: apt-get, dnf, pacman, pip
}

// Error says which program needs root; it starts with "skipped: " like every entry that does not
// apply here.
func (e *NeedsRootError) Error() string {
	return fmt.Sprintf("skipped: %s needs root and this host is not privileged", e.Tool)
}

// NeedsRoot reports whether install entry index of b needs root, and which program does: the
// system package managers apt, dnf and pacman, and pip installing outside a virtualenv without
// user: true. lookupEnv reads the environment the entry would run with (VIRTUAL_ENV); nil is
// os.LookupEnv.
func NeedsRoot(b *manifest.Bundle, index int, lookupEnv func(string) (string, bool)) (tool string, ok bool) {
	in, err := newInstaller(b, Options{LookupEnv: lookupEnv})
	if err != nil || index < 0 || index >= len(b.CLI.Install) {
		return "", false
	}
	e := b.CLI.Install[index]
	if e.Experimental || !manifest.IsKnownMethod(e.Method) || in.platformMismatch("", e.OS, e.Arch) != "" {
		return "", false
	}
	switch e.Method {
	case manifest.MethodDownload, manifest.MethodCurl, manifest.MethodVendored, manifest.MethodGo:
		return "", false
	}
	c := in.toolCommand(e)
	return c.tools[0], c.root
}

// RunEntry runs install entry index of b, one that needs root (NeedsRoot), in this process:
// `sudo clihostctl install` runs it as the administrator when the daemon is not root and handed it
// over (Options.HandOff). o.Privileged must be set (the caller is root); o.StateDir is not used.
// The package manager gets the environment the daemon's would (PATH, HOME, proxies and its own
// variables from o.LookupEnv, nothing else) and its output goes to o.Output as it runs. The result
// names the binary where the install looks for it afterwards; the daemon finds it again itself
// (Find) before it records anything.
func RunEntry(ctx context.Context, b *manifest.Bundle, index int, o Options) (Result, error) {
	in, err := newInstaller(b, o)
	if err != nil {
		return Result{}, err
	}
	if _, ok := NeedsRoot(b, index, in.o.LookupEnv); !ok {
		return Result{}, fmt.Errorf("install %s: install[%d] is not a package-manager entry that needs root", in.key, index)
	}
	if !in.o.Privileged {
		return Result{}, fmt.Errorf("install %s: install[%d]: %w", in.key, index, &NeedsRootError{Index: index})
	}
	if req := b.CLI.Requires; req != nil {
		if reason := in.platformMismatch("requires.", req.OS, req.Arch); reason != "" {
			return Result{}, fmt.Errorf("install %s: %w: %s", in.key, ErrInstallFailed, reason)
		}
	}
	e := b.CLI.Install[index]
	if err := in.requires(e); err != nil {
		return Result{}, fmt.Errorf("install %s: %w: install[%d] (%s): %w", in.key, ErrInstallFailed, index, e.Method, err)
	}
	path, err := in.packageManager(ctx, e)
	if err != nil {
		return Result{Skipped: []Skip{{Index: index, Method: e.Method, Reason: err.Error()}}},
			fmt.Errorf("install %s: %w: install[%d] (%s): %w", in.key, ErrInstallFailed, index, e.Method, err)
	}
	return Result{Index: index, Method: e.Method, BinPath: path}, nil
}

// Find is where install entry index of b left the bundle's binary, looked up as the install does
// after running the entry: the entry's own directories (a pip --user bin directory), then the
// absolute directories of PATH from o.LookupEnv. The daemon uses it to record an install another
// process ran, never trusting that process's word for the path.
func Find(b *manifest.Bundle, index int, o Options) (string, error) {
	in, err := newInstaller(b, o)
	if err != nil {
		return "", err
	}
	if index < 0 || index >= len(b.CLI.Install) {
		return "", fmt.Errorf("install %s: no install entry %d", in.key, index)
	}
	c := in.toolCommand(b.CLI.Install[index])
	return in.findBin(c.binDirs...)
}

// execStreaming runs an installer process with its output going to Options.Output as it is
// written (and its last lines kept for the error). It stays in the caller's process group, so a
// Ctrl-C at the terminal reaches the package manager itself, which knows how to stop cleanly; a
// canceled ctx sends it SIGTERM, and SIGKILL 10 seconds later.
func (in *installer) execStreaming(ctx context.Context, exe string, args []string, dir string, env []string, timeout time.Duration, line string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var last tailBuffer
	out := io.MultiWriter(in.o.Output, &last)
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: did not finish within %s", line, timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: stopped: %w", line, ctx.Err())
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return fmt.Errorf("%s: exit status %d%s", line, ee.ExitCode(), tail(last.b))
	}
	return fmt.Errorf("%s: %w%s", line, err, tail(last.b))
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

// Write keeps the end of p; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	const keep = 4 << 10
	t.b = append(t.b, p...)
	if len(t.b) > keep {
		t.b = append(t.b[:0], t.b[len(t.b)-keep:]...)
	}
	return len(p), nil
}
