// Package lifecycle holds what the lifecycle stages share: the Scope setup and auth state are kept
// per, and the Env their commands run in (Command, Run). Packages setup and authstate both use it,
// so neither owns the other's types.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/egress"
	"github.com/clihost/clihost/store"
)

// CaptureLimit caps the output captured from a lifecycle command (setup steps, skip_if, options,
// login checks, refresh), per stream.
const CaptureLimit = 64 << 10

// Scope is what setup and auth state are kept per: the bundle (id@major), the workspace and the user.
type Scope struct {
	Bundle    string `json:"bundle"`
	Workspace string `json:"workspace"`
	User      string `json:"user"`
}

// Key is the scope's store key (store.ScopeKey).
func (s Scope) Key() string { return store.ScopeKey(s.Bundle, s.Workspace, s.User) }

// Validate reports an error unless s belongs to b: Bundle must be b's id@major, so that state is
// never filed under another bundle's key.
func (s Scope) Validate(b *manifest.Bundle) error {
	if b == nil || b.CLI == nil {
		return errors.New("no bundle (its CLI.md did not decode)")
	}
	if s.Bundle != b.Key() {
		return fmt.Errorf("scope is for bundle %q but the manifest is %s", s.Bundle, b.Key())
	}
	return nil
}

// Env says how to run a bundle's lifecycle commands: the resolved binary, the working directory
// (absolute) and the complete environment (KEY=VALUE; nothing is inherited).
type Env struct {
	BinPath string   // the bundle's resolved bin (absolute)
	Dir     string   // working directory, absolute
	Env     []string // the complete environment
	// Sandbox is the kernel sandbox the commands run in (the bundle's own, see runner.Command);
	// nil runs them unconfined.
	Sandbox *isolation.Plan
	// Egress is the network the commands get (see runner.Command); nil: none.
	Egress *egress.Policy
	// Guard, when set, brackets each command Run starts: it is called before the command starts
	// and returns what to call once the command's processes have all exited. The host uses it to
	// apply its git rule to what the command wrote (sandbox.Policy.SnapshotGit, sandbox.Sweep).
	Guard func() (after func(), err error)
}

// Run runs c, a command from Command, inside Guard when one is set.
func (e Env) Run(ctx context.Context, c runner.Command) (runner.Result, error) {
	if e.Guard == nil {
		return runner.Run(ctx, c)
	}
	after, err := e.Guard()
	if err != nil {
		return runner.Result{}, err
	}
	defer after()
	return runner.Run(ctx, c)
}

// Command builds the process for a manifest command line already split into words (argv.Split). The
// first word must name the bundle's bin (compared by base name, as version_check is): the resolved
// BinPath replaces it, so a manifest can only run its own CLI, never another program on the host.
// No shell is involved. timeout is the wall-clock limit.
func (e Env) Command(bin string, words []string, timeout time.Duration) (runner.Command, error) {
	if len(words) == 0 {
		return runner.Command{}, errors.New("empty command")
	}
	if e.BinPath == "" {
		return runner.Command{}, errors.New("the bundle's binary is not resolved (empty BinPath)")
	}
	if filepath.Base(words[0]) != filepath.Base(bin) {
		return runner.Command{}, fmt.Errorf("the command runs %q, not the bundle's bin %q; lifecycle commands may only run the bundle's own CLI", words[0], bin)
	}
	return runner.Command{
		Path:        e.BinPath,
		Args:        words[1:],
		Dir:         e.Dir,
		Env:         e.Env,
		Timeout:     timeout,
		StdoutLimit: CaptureLimit,
		StderrLimit: CaptureLimit,
		Sandbox:     e.Sandbox,
		Egress:      e.Egress,
	}, nil
}
