package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/clihost/clihost/errcode"
)

// executableDir is the folder of the running host's executable, symbolic links resolved ("" when it
// cannot be named): the sandbox helper (clihost-sandbox) is taken from there, and the service
// manager starts the host's next run from there.
var executableDir = sync.OnceValue(func() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	real, err := resolvedPath(filepath.Dir(self))
	if err != nil {
		return ""
	}
	return real
})

// OwnedOverlap refuses, with workspace_denied, a workspace ws that is, contains or lies inside a
// folder the host later executes or trusts: its state directory stateDir ("" for none: bin/ holds
// the CLIs Install put there, which later calls run, and homes/ the HOMEs it keeps for each uid,
// whose .bashrc, .gitconfig and .npmrc later calls read) and the folder of its own executable
// (beside it, the clihost-sandbox helper every sandbox starts from, outside any sandbox); and a
// workspace that holds one of trusted (an approval policy: whoever writes it approves every call)
// or the temporary folder (os.TempDir: the env files with secrets of container calls and the
// folders of version checks are made there, as the host's user). A tool allowed to write its
// workspace (fs.write ./**) could otherwise plant a program that runs with another bundle's
// credentials, another uid's rights, or the host's own. Symbolic links are resolved in every path
// first (the part that exists), so a workspace reaching a folder through a link, or one made
// after the host started, is judged by where it leads.
func OwnedOverlap(ws, stateDir string, trusted ...string) *Error {
	w, err := resolvedPath(ws)
	if err != nil {
		return &Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("workspace %q: %v", ws, err)}
	}
	if stateDir != "" {
		s, err := resolvedPath(stateDir)
		if err == nil && (within(w, s) || within(s, w)) {
			return ownedError(ws, "clihost's state directory "+stateDir+" (its bin/ holds the installed CLIs later calls run, its homes/ the HOMEs it keeps)",
				"name a workspace that neither holds nor lies in the state directory (a project folder), or move the state elsewhere (clihostd --state)")
		}
	}
	if dir := executableDir(); dir != "" && (within(w, dir) || within(dir, w)) {
		return ownedError(ws, "the folder "+dir+" of the host's own executable (the clihost-sandbox helper beside it starts every sandbox)",
			"name a workspace that does not hold the folder clihostd is installed in, or install clihostd and clihost-sandbox elsewhere (/usr/local/bin)")
	}
	for _, p := range append(slices.Clone(trusted), os.TempDir()) {
		if r, err := resolvedPath(p); err == nil && within(r, w) {
			return ownedError(ws, p+", which the host reads and trusts (an approval policy, or the temporary folder of its version checks and container env files)",
				"name a workspace that does not hold it (a project folder), or move the file out of the workspace (clihostd --approvals)")
		}
	}
	return nil
}

// ownedError is the workspace_denied refusal of ws, which overlaps what.
func ownedError(ws, what, hint string) *Error {
	return &Error{Code: errcode.WorkspaceDenied, Category: "permission",
		Message: fmt.Sprintf("the workspace %s holds or lies in %s: a tool allowed to write its workspace could change it, so it is refused", ws, what),
		Hint:    hint}
}

// resolvedPath is p absolute and clean with the symbolic links of its existing part resolved (the
// rest may not exist yet).
func resolvedPath(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...), nil
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
