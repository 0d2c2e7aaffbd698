package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// absentInWritable returns the deny paths that lie strictly inside one of the writable roots and do
// not exist now.
func absentInWritable(deny, writable []string) []string {
	var out []string
	for _, d := range deny {
		if root := writableRoot(d, writable); root == "" || root == d {
			continue
		}
		if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			out = append(out, d)
		}
	}
	return out
}

// writableRoot returns the writable root p lies in, or "".
func writableRoot(p string, writable []string) string {
	for _, w := range writable {
		if within(p, w) {
			return w
		}
	}
	return ""
}

// gitControlNames are the absent deny paths in a .git directory that the git check judges by
// content (see SnapshotGit) instead of removing them: a repository the call made keeps its config
// and sample hooks.
var gitControlNames = []string{"hooks", "config", "config.worktree"}

// Sweep runs after a call's processes have all exited. It removes whatever the call created at
// p.Absent: deny paths inside writable roots (editor task files, and, when the policy has no git
// snapshot, a git hook directory or config) that the kernel could not mask because they did not
// exist yet, and that the user's own tools would otherwise run later, outside the sandbox. When
// SnapshotGit ran before the call, it then applies the git rule (see gitguard.go) and returns what
// it neutralised. The removed paths and the findings are for warnings in the call's result.
//
// Each removal happens through an os.Root opened on the writable root, so a symbolic link the
// program planted on the way (ws/bare → /home/user/repo) can never make it remove anything outside
// that root.
func Sweep(p *Policy) (removed []string, git []GitFinding, err error) {
	var errs []error
	for _, a := range p.Absent {
		if p.git != nil && filepath.Base(filepath.Dir(a)) == ".git" && slices.Contains(gitControlNames, filepath.Base(a)) {
			continue
		}
		w := writableRoot(a, p.Writable)
		if w == "" {
			continue
		}
		rel, err := filepath.Rel(w, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		root, err := os.OpenRoot(w)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", w, err))
			continue
		}
		if _, err := root.Lstat(rel); err == nil {
			if err := root.RemoveAll(rel); err != nil {
				errs = append(errs, fmt.Errorf("sweep %s: %w", a, err))
			} else {
				removed = append(removed, a)
			}
		}
		root.Close()
	}
	if p.git != nil {
		found, err := p.checkGit()
		git = found
		errs = append(errs, err)
	}
	return removed, git, errors.Join(errs...)
}
