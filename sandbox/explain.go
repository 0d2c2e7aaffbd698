package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// The reasons a path is denied, as Explain names them.
const (
	whyCredential   = "the mandatory deny of other programs' credentials"
	whyRunState     = "the mandatory mask of the host's run-state directories (local services' sockets)"
	whySocket       = "the mandatory deny of container and system bus sockets"
	whyStartup      = "the mandatory deny of shell and login startup files"
	whyHomeBin      = "the mandatory deny of a ~/bin or ~/.local/bin the call would create"
	whySession      = "the mandatory deny of the user's session sockets (bus, agents)"
	whyHost         = "the mask of clihost's own files (the daemon's state directory and control socket)"
	whyFSDeny       = "the bundle's sandbox.fs.deny"
	whyWritableMask = "the mandatory mask of git hooks, git config and editor task files in writable directories"
)

// origin is what a Policy was compiled from, as far as Explain needs it.
type origin struct {
	subject     string            // the bundle's key, and the tool's command path
	workspace   string            // the resolved workspace, "" when none
	read, write []string          // the effective fs.read and fs.write patterns, as declared
	why         map[string]string // denied path → reason
}

// Explain says why this sandbox refuses access to path (absolute, or relative to the workspace), in
// one sentence naming the rule: a mask (which mandatory deny, or the bundle's fs.deny), a path
// the sandbox does not grant (outside the workspace, not in fs.read), a path it grants read-only
// (not in fs.write, or a bundle folder clihost protects), a file it may not execute, or, when the
// sandbox grants the access, the file's own owner and mode. It reads the filesystem as the host
// sees it now; a path the sandbox does not grant is named as given (made absolute), never by what
// its symbolic links resolve to on the host. It is "" for a nil policy or an empty path.
func (p *Policy) Explain(path string) string {
	if p == nil || path == "" {
		return ""
	}
	shown, abs := p.absolute(path)
	o := p.origin
	if d, ok := p.deniedBy(abs); ok {
		why := cmp.Or(o.why[d], "a mandatory deny")
		if d == abs {
			return fmt.Sprintf("%s is masked by %s", shown, why)
		}
		return fmt.Sprintf("%s is masked by %s (%s)", shown, why, d)
	}
	for _, special := range []string{"/proc", "/dev"} {
		if within(shown, special) {
			return fmt.Sprintf("%s is not reachable: the sandbox mounts its own %s", shown, special)
		}
	}
	if pr, ok := coveringAny(abs, p.Protect); ok {
		return fmt.Sprintf("%s is read-only in the sandbox: clihost reads bundles from %s", shown, pr)
	}
	if !p.readable(abs) {
		where := ""
		if o.workspace != "" && !within(abs, o.workspace) {
			where = fmt.Sprintf(" is outside the workspace %s and", o.workspace)
		}
		return fmt.Sprintf("%s%s is not in the sandbox.fs.read of %s (it grants %s); the sandbox refused it",
			shown, where, o.subject, patterns(o.read, "nothing beyond the runtime files"))
	}
	if !slices.Contains(p.Exec, abs) && isExecutableFile(abs) {
		return fmt.Sprintf("the sandbox of %s grants reading %s, not executing it (it is not the bundle's bin or an exec.spawn program)%s",
			o.subject, abs, ownPermissions(abs, "; if it was a read, "))
	}
	if writableRoot(abs, p.Writable) == "" {
		return fmt.Sprintf("the sandbox of %s grants reading %s, not writing it (its sandbox.fs.write grants %s)%s",
			o.subject, abs, patterns(o.write, "nothing"), ownPermissions(abs, "; if it was a read, "))
	}
	return fmt.Sprintf("the sandbox of %s grants %s (read and write)%s", o.subject, abs, ownPermissions(abs, "; "))
}

// absolute makes path absolute against the workspace: shown is that path cleaned, abs the same
// with the symlinks of its existing part resolved, as the rules' paths are.
func (p *Policy) absolute(path string) (shown, abs string) {
	if !filepath.IsAbs(path) && p.origin.workspace != "" {
		path = filepath.Join(p.origin.workspace, path)
	}
	shown = filepath.Clean(path)
	if r, err := resolve(shown); err == nil {
		return shown, r
	}
	return shown, shown
}

// deniedBy returns the Deny path abs is or lies inside.
func (p *Policy) deniedBy(abs string) (string, bool) {
	for _, d := range p.Deny {
		if within(abs, d) {
			return d, true
		}
	}
	return "", false
}

// readable reports whether a rule grants reading abs (Runtime, Rules or Exec).
func (p *Policy) readable(abs string) bool {
	for _, r := range slices.Concat(p.Runtime, p.Rules) {
		if r.Path == abs || r.Subtree && within(abs, r.Path) {
			return true
		}
	}
	return slices.Contains(p.Exec, abs)
}

// patterns lists declared patterns for a message, or none when there are none.
func patterns(ps []string, none string) string {
	if len(ps) == 0 {
		return none
	}
	return strings.Join(ps, ", ")
}

// ownPermissions describes abs's owner and mode after prefix, for a refusal the sandbox did not
// make: the file's own permissions did, for the uid the CLI runs as.
func ownPermissions(abs, prefix string) string {
	st, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return prefix + abs + " does not exist"
	}
	if err != nil {
		return ""
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%sthe file's own permissions refused it: mode %04o, owner uid %d gid %d", prefix, st.Mode().Perm(), sys.Uid, sys.Gid)
}

// isExecutableFile reports whether abs is a regular file with an execute bit.
func isExecutableFile(abs string) bool {
	st, err := os.Stat(abs)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
