package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"slices"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
	"golang.org/x/sys/unix"
)

// runLoginCommand runs a bundle's login command in this terminal with runner.Run, in the sandbox the
// daemon compiled for it (its egress and ingress served, as the daemon does for calls), with an
// environment built from this process's (the bundle's env.pass and env.set, PATH, and HOME set to
// the home the sandbox's ~ stands for). The command's process group gets the terminal's
// foreground for as long as it runs, when stdin is one; ctx ends it (SIGTERM to its group).
func runLoginCommand(ctx context.Context, ios *IOStreams, info control.LoginInfo, ws string) error {
	if len(info.Argv) == 0 {
		return errors.New("empty login command")
	}
	env, _ := sandbox.Env(os.LookupEnv, append(slices.Clone(info.EnvPass), "PATH"), info.EnvSet)
	if info.Home != "" {
		env = append(env, "HOME="+info.Home)
	}
	if info.RequiresCallbackURL {
		u, release, err := withCallbackURL(&info)
		if err != nil {
			return err
		}
		defer release()
		env = append(env, callbackEnv+"="+u)
		fmt.Fprintf(ios.ErrOut, "the login's callback URL (forwarded into its sandbox while it runs): %s\n", u)
	}
	c := runner.Command{Path: info.Argv[0], Args: info.Argv[1:], Dir: ws, Env: env, Sandbox: info.Sandbox,
		Attach: &runner.Attach{Stdin: ios.In, Stdout: ios.Out, Stderr: ios.ErrOut}}
	if tty, ok := ios.In.(*os.File); ok && ios.IsStdinTTY() {
		c.Attach.Foreground = func(pgid int) func() { return foreground(int(tty.Fd()), pgid) }
	}
	if info.Sandbox == nil {
		fmt.Fprintln(ios.ErrOut, "clihostctl: warning: the daemon runs with --sandbox=off: the login command runs unconfined")
		return loginResult(runner.Run(ctx, c))
	}
	if p := info.Egress; p != nil {
		c.Egress = runner.EgressPolicy(p.Allow, p.Ports, p.AdmitNets, p.MaxConns)
	}
	// The git rule (see docs/operations.md): what the login command writes in its writable roots
	// is judged once it has exited.
	git := sandbox.GitPolicy(info.Sandbox.ReadWrite, info.Home)
	if err := git.SnapshotGit(0); err != nil {
		return err
	}
	defer sweepLogin(ios, git)
	return loginResult(runner.Run(ctx, c))
}

// callbackEnv is the variable a login command with requires_callback_url finds its callback URL in.
const callbackEnv = "CLIHOST_CALLBACK_URL"

// callbackWordRE matches the ${callback_url} placeholder in a login command's words (single-quoted
// in login.cmd, so that the daemon's split keeps it literal).
var callbackWordRE = regexp.MustCompile(`\$\{\s*callback_url\s*\}`)

// withCallbackURL allocates a free port on the host's loopback for a login that requires a
// callback URL (AIP-29 auth.login.requires_callback_url), puts the URL in place of
// ${callback_url} in info.Argv, and adds the port to the sandbox's ingress: while the command runs,
// the host's 127.0.0.1:port is forwarded to the same port on the sandbox's loopback, where the
// command listens; the forwarding ends with the command. For a sandboxed login the port stays
// reserved until release (a socket bound with SO_REUSEPORT, not listening: the forwarder, this
// user's, binds it beside; another user cannot); unsandboxed, the command binds it itself, so it
// is released at once.
func withCallbackURL(info *control.LoginInfo) (u string, release func(), err error) {
	var port int
	release = func() {}
	if info.Sandbox != nil {
		port, release, err = reservePort()
	} else {
		port, err = freePort()
	}
	if err != nil {
		return "", nil, fmt.Errorf("allocate the login's callback port: %w", err)
	}
	u = fmt.Sprintf("http://127.0.0.1:%d/callback", port)
	argv := slices.Clone(info.Argv)
	for i, w := range argv[1:] {
		argv[i+1] = callbackWordRE.ReplaceAllLiteralString(w, u)
	}
	info.Argv = argv
	if info.Sandbox != nil {
		plan := *info.Sandbox
		plan.Ingress = append(slices.Clone(plan.Ingress), port)
		info.Sandbox = &plan
	}
	return u, release, nil
}

// freePort is a port of 127.0.0.1 free now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// reservePort binds a TCP socket with SO_REUSEPORT (and without SO_REUSEADDR) to a free port of
// 127.0.0.1 without listening: no connection reaches it, only this user can bind the port beside
// it, and release closes it.
func reservePort() (int, func(), error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, err
	}
	release := func() { _ = unix.Close(fd) }
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		release()
		return 0, nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		release()
		return 0, nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		release()
		return 0, nil, err
	}
	return sa.(*unix.SockaddrInet4).Port, release, nil
}

// loginResult is the error of a login command's run: why it did not start, or how it failed.
func loginResult(res runner.Result, err error) error {
	switch {
	case err != nil:
		return err
	case res.Exhausted != "":
		return errors.New(res.Exhausted)
	case res.Signal != "":
		return fmt.Errorf("signal: %s", res.Signal)
	case res.ExitCode != 0:
		return fmt.Errorf("exit status %d", res.ExitCode)
	}
	return nil
}

// sweepLogin applies the git rule after the login command and says on stderr what it neutralised.
func sweepLogin(ios *IOStreams, git *sandbox.Policy) {
	_, found, err := sandbox.Sweep(git)
	for _, f := range found {
		fmt.Fprintf(ios.ErrOut, "clihostctl: %s, which the login command wrote: %s (%s); the original is in %s\n", f.Path, f.Action, f.Why, f.Moved)
	}
	if err != nil {
		fmt.Fprintln(ios.ErrOut, "clihostctl: warning: could not check what the login command wrote:", err)
	}
}

// foreground gives terminal fd to process group pgid and returns what gives it back; nothing
// happens when that fails.
func foreground(fd, pgid int) (restore func()) {
	own, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return func() {}
	}
	// A background process group changing the foreground gets SIGTTOU unless it ignores it.
	signal.Ignore(unix.SIGTTOU)
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgid); err != nil {
		signal.Reset(unix.SIGTTOU)
		return func() {}
	}
	return func() {
		_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, own)
		signal.Reset(unix.SIGTTOU)
	}
}
