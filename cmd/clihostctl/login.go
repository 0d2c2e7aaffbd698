package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

// failedLoginWait bounds how long the daemon checks the login state after the login command
// failed: a login finished elsewhere (in a browser) shows at once; nothing else will come.
const failedLoginWait = 10 * time.Second

// loginOptions are the flags and argument of login and logout.
type loginOptions struct {
	*globalOptions
	bundle    string
	workspace string
	wait      time.Duration // login only
	asJSON    bool
}

// newLoginCmd is clihostctl login; runF, when set, runs instead of runLogin (tests).
func newLoginCmd(g *globalOptions, runF func(*loginOptions) error) *cobra.Command {
	o := &loginOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "login BUNDLE",
		Short: "Log a bundle's CLI in: run its login command here, then let the daemon confirm it",
		Long: `Login runs the bundle's login.cmd in this terminal (for browser and device flows), inside the
bundle's kernel sandbox, then asks clihostd to confirm it with completes_when; the bundle is then
authed for your user in the workspace.`,
		Example: "  clihostctl login gh",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.bundle = args[0]
			if runF != nil {
				return runF(o)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runLogin(ctx, o)
		},
	}
	cmd.Flags().StringVar(&o.workspace, "workspace", "", "the workspace the login is for (default: the current directory)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the daemon's result as JSON ({phase, reason, error})")
	cmd.Flags().DurationVar(&o.wait, "wait", 2*time.Minute, "how long the daemon waits for the login to be confirmed (at most 10s when the login command failed)")
	return cmd
}

// runLogin runs o.bundle's login command here (runLoginCommand), then asks the daemon to confirm
// the login.
func runLogin(ctx context.Context, o *loginOptions) error {
	ws, err := (&hostOptions{workspace: o.workspace}).workspaceDir()
	if err != nil {
		return err
	}
	c := o.client()
	info, err := c.LoginInfo(ctx, o.bundle, ws)
	if err != nil {
		return err // a daemon that is not root refuses other users' logins, naming the operator's command
	}
	if err := runsWhatDaemonSays(ctx, c); err != nil {
		return err
	}
	fmt.Fprintf(o.io.ErrOut, "running %v\n", info.Argv)
	wait := o.wait
	if err := runLoginCommand(ctx, o.io, info, ws); err != nil {
		wait = min(wait, failedLoginWait)
		fmt.Fprintf(o.io.ErrOut, "clihostctl: the login command failed: %v; checking the login state anyway (for at most %s)\n", err, wait)
	}
	res, err := c.Login(ctx, control.ScopeRequest{Bundle: o.bundle, Workspace: ws, WaitSeconds: int(wait.Seconds())})
	if err != nil {
		return err
	}
	return printAuth(o.globalOptions, o.bundle, res, "authed", o.asJSON)
}

// newLogoutCmd is clihostctl logout; runF, when set, runs instead of runLogout (tests).
func newLogoutCmd(g *globalOptions, runF func(*loginOptions) error) *cobra.Command {
	o := &loginOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "logout BUNDLE",
		Short: "Mark a bundle logged out for your user in the workspace",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bundle = args[0]
			if runF != nil {
				return runF(o)
			}
			return runLogout(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.workspace, "workspace", "", "the workspace (default: the current directory)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the daemon's result as JSON ({phase, reason, error})")
	return cmd
}

// runLogout marks o.bundle logged out.
func runLogout(ctx context.Context, o *loginOptions) error {
	ws, err := (&hostOptions{workspace: o.workspace}).workspaceDir()
	if err != nil {
		return err
	}
	res, err := o.client().Logout(ctx, control.ScopeRequest{Bundle: o.bundle, Workspace: ws})
	if err != nil {
		return err
	}
	return printAuth(o.globalOptions, o.bundle, res, "unauthed", o.asJSON)
}

// printAuth prints the state after login or logout (asJSON: the daemon's result as JSON); anything
// but want exits 1.
func printAuth(g *globalOptions, bundle string, res control.AuthResult, want string, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(g.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
		if res.Error != nil || res.Phase != want {
			return exitError{1}
		}
		return nil
	}
	if res.Error != nil {
		fmt.Fprintf(g.io.ErrOut, "clihostctl: %s: %s\n", res.Error.Code, res.Error.Message)
		if res.Error.Hint != "" {
			fmt.Fprintf(g.io.ErrOut, "hint: %s\n", res.Error.Hint)
		}
		return exitError{1}
	}
	fmt.Fprintf(g.io.Out, "%s: %s", bundle, res.Phase)
	if res.Reason != "" {
		fmt.Fprintf(g.io.Out, " (%s)", res.Reason)
	}
	fmt.Fprintln(g.io.Out)
	if res.Phase != want {
		return exitError{1}
	}
	return nil
}

// runsWhatDaemonSays refuses a daemon whose login command clihostctl must not run: login runs the
// command and the sandbox plan the daemon sends, as the user running clihostctl (see
// trustsDaemon).
func runsWhatDaemonSays(ctx context.Context, c *control.Client) error {
	uid, err := c.DaemonUID(ctx)
	if err != nil {
		return err
	}
	return trustsDaemon(uid, os.Geteuid(), c.Socket)
}

// trustsDaemon says whether a clihostctl running as self may run what a daemon running as
// daemonUID chose: only a root daemon's, or its own user's. Root must not run what a less
// privileged user chose (the unit's daemon runs as clihost, whose user owns /run/clihost: a
// compromised daemon user could answer there with any command and no sandbox), nor may a socket
// group's member (the same daemon would run code as the member); such a daemon's logins are its
// own user's anyway (it refuses other callers' logins).
func trustsDaemon(daemonUID, self int, socket string) error {
	switch {
	case daemonUID == 0 || daemonUID == self:
		return nil
	case self == 0:
		return fmt.Errorf("clihostd on %s runs as uid %d, not root: clihostctl running as root does not run a login command "+
			"a less privileged daemon sends; run clihostctl login as the daemon's user (sudo -u %s clihostctl login …)", socket, daemonUID, userOrUID(daemonUID))
	}
	return fmt.Errorf("clihostd on %s runs as uid %d, neither root nor you (uid %d): its CLIs' logins are that user's, and clihostctl "+
		"runs no login command another user's daemon sends; the operator runs: sudo -u %s clihostctl login …", socket, daemonUID, self, userOrUID(daemonUID))
}

// userOrUID is uid's user name, or the uid.
func userOrUID(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}
