package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

// failedLoginWait bounds how long the daemon checks the login state after the login command
// failed: a login finished elsewhere (in a browser) shows at once; nothing else will come.
const failedLoginWait = 10 * time.Second

func newLoginCmd(g *globalOptions) *cobra.Command {
	var workspace string
	var wait time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "login BUNDLE",
		Short: "Log a bundle's CLI in: run its login command here, then let the daemon confirm it",
		Long: `Login runs the bundle's login.cmd in this terminal (for browser and device flows), inside the
bundle's kernel sandbox, then asks clihostd to confirm it with completes_when; the bundle is then
authed for your user in the workspace.`,
		Example: "  clihostctl login gh",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ws, err := (&hostOptions{workspace: workspace}).workspaceDir()
			if err != nil {
				return err
			}
			c := g.client()
			if err := runsWhatDaemonSays(ctx, c); err != nil {
				return err
			}
			info, err := c.LoginInfo(ctx, args[0], ws)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "running %v\n", info.Argv)
			if err := runLogin(ctx, info, ws); err != nil {
				wait = min(wait, failedLoginWait)
				fmt.Fprintf(g.stderr, "clihostctl: the login command failed: %v; checking the login state anyway (for at most %s)\n", err, wait)
			}
			res, err := c.Login(ctx, control.ScopeRequest{Bundle: args[0], Workspace: ws, WaitSeconds: int(wait.Seconds())})
			if err != nil {
				return err
			}
			return printAuth(g, args[0], res, "authed", asJSON)
		},
	}
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace the login is for (default: the current directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the daemon's result as JSON ({phase, reason, error})")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long the daemon waits for the login to be confirmed (at most 10s when the login command failed)")
	return cmd
}

func newLogoutCmd(g *globalOptions) *cobra.Command {
	var workspace string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "logout BUNDLE",
		Short: "Mark a bundle logged out for your user in the workspace",
		Args:  exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ws, err := (&hostOptions{workspace: workspace}).workspaceDir()
			if err != nil {
				return err
			}
			res, err := g.client().Logout(context.Background(), control.ScopeRequest{Bundle: args[0], Workspace: ws})
			if err != nil {
				return err
			}
			return printAuth(g, args[0], res, "unauthed", asJSON)
		},
	}
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace (default: the current directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the daemon's result as JSON ({phase, reason, error})")
	return cmd
}

// printAuth prints the state after login or logout (asJSON: the daemon's result as JSON); anything
// but want exits 1.
func printAuth(g *globalOptions, bundle string, res control.AuthResult, want string, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(g.stdout)
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
		fmt.Fprintf(g.stderr, "clihostctl: %s: %s\n", res.Error.Code, res.Error.Message)
		if res.Error.Hint != "" {
			fmt.Fprintf(g.stderr, "hint: %s\n", res.Error.Hint)
		}
		return exitError{1}
	}
	fmt.Fprintf(g.stdout, "%s: %s", bundle, res.Phase)
	if res.Reason != "" {
		fmt.Fprintf(g.stdout, " (%s)", res.Reason)
	}
	fmt.Fprintln(g.stdout)
	if res.Phase != want {
		return exitError{1}
	}
	return nil
}

// runsWhatDaemonSays refuses, for a clihostctl running as root, a daemon that is not root: login
// runs the command and the sandbox plan the daemon sends, and root must not run what a less
// privileged user chose (the unit's daemon runs as clihost, whose user owns /run/clihost: a
// compromised daemon user could answer there with any command and no sandbox).
func runsWhatDaemonSays(ctx context.Context, c *control.Client) error {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, err := c.DaemonUID(ctx)
	if err != nil {
		return err
	}
	if uid != 0 {
		return fmt.Errorf("clihostd on %s runs as uid %d, not root: clihostctl running as root does not run a login command "+
			"a less privileged daemon sends; run clihostctl login as the user whose login it is (not with sudo)", c.Socket, uid)
	}
	return nil
}
