package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/egress"
	"github.com/clihost/clihost/sandbox/nsinit"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// runLogin runs a bundle's login command in this terminal, in the sandbox the daemon compiled for
// it (serving its egress, as the daemon does for calls), with an environment built from this process's (the bundle's env.pass and env.set, PATH, and
// HOME set to the home the sandbox's ~ stands for). When stdin is a terminal, the command's process
// group gets the terminal's foreground for as long as it runs.
func runLogin(ctx context.Context, info control.LoginInfo, ws string) error {
	env, _ := sandbox.Env(os.LookupEnv, append(slices.Clone(info.EnvPass), "PATH"), info.EnvSet)
	if info.Home != "" {
		env = append(env, "HOME="+info.Home)
	}
	if info.Sandbox == nil {
		fmt.Fprintln(os.Stderr, "clihostctl: warning: the daemon runs with --sandbox=off: the login command runs unconfined")
		return runUnconfined(ctx, info.Argv, ws, env)
	}
	plan := *info.Sandbox
	plan.Path, plan.Args, plan.Dir, plan.Env = info.Argv[0], info.Argv, ws, env
	var pol *egress.Policy
	if info.Egress != nil {
		plan.UseEgress()
		pol = &egress.Policy{Allow: info.Egress.Allow, Ports: info.Egress.Ports, AdmitNets: info.Egress.AdmitNets,
			MaxConns: info.Egress.MaxConns}
	}
	// The git rule (see docs/operations.md): what the login command writes in its writable roots
	// is judged once it has exited.
	git := sandbox.GitPolicy(plan.ReadWrite, info.Home)
	if err := git.SnapshotGit(0); err != nil {
		return err
	}
	defer sweepLogin(git)
	cmd, err := nsinit.Command(plan)
	if err != nil {
		return err
	}
	defer func() { _ = cmd.Release() }() // the login's control groups, with whatever is left in them
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Start()
	cmd.CloseChildEnds()
	if err != nil {
		_ = cmd.Failure()
		return err
	}
	// Browser and device logins talk to the CLI's service: serve its egress, as the daemon does for
	// calls, until the command is gone.
	stopEgress, err := runner.ServeEgress(cmd, pol)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if f := cmd.Failure(); f != nil {
			return f
		}
		return err
	}
	defer stopEgress()
	// A browser login's callback server listens inside the sandbox; the browser reaches it here.
	stopIngress, err := cmd.ServeIngress()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = cmd.Failure()
		return err
	}
	defer stopIngress()
	restore := foreground(cmd.Process.Pid)
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Signal(unix.SIGTERM) })
	waitErr := cmd.Wait()
	stop()
	restore()
	if err := cmd.Failure(); err != nil {
		return err
	}
	return waitErr
}

// sweepLogin applies the git rule after the login command and says on stderr what it neutralised.
func sweepLogin(git *sandbox.Policy) {
	_, found, err := sandbox.Sweep(git)
	for _, f := range found {
		fmt.Fprintf(os.Stderr, "clihostctl: %s, which the login command wrote: %s (%s); the original is in %s\n", f.Path, f.Action, f.Why, f.Moved)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clihostctl: warning: could not check what the login command wrote:", err)
	}
}

// foreground gives the terminal on stdin to process group pgid and returns what gives it back;
// nothing happens when stdin is not a terminal.
func foreground(pgid int) (restore func()) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return func() {}
	}
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

// runUnconfined runs argv as a plain child in the foreground (the operator turned the sandbox off).
func runUnconfined(ctx context.Context, argv []string, ws string, env []string) error {
	if len(argv) == 0 {
		return errors.New("empty login command")
	}
	p, err := os.StartProcess(argv[0], argv, &os.ProcAttr{Dir: ws, Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = p.Signal(unix.SIGTERM) })
	defer stop()
	st, err := p.Wait()
	if err != nil {
		return err
	}
	if !st.Success() {
		return fmt.Errorf("%s", st)
	}
	return nil
}
