package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// Sweep removes, after a call's processes have all exited, whatever the call created at p.Absent:
// deny paths inside writable roots (a git hook directory, a .git/config, editor task files) that
// the kernel could not mask because they did not exist yet, and that the user's own tools would
// otherwise run later, outside the sandbox. It returns the paths it removed, for a warning in the
// call's result.
//
// Each removal happens through an os.Root opened on the writable root, so a symbolic link the
// program planted on the way (ws/bare → /home/user/repo) can never make it remove anything outside
// that root.
func Sweep(p *Policy) (removed []string, err error) {
	var errs []error
	for _, a := range p.Absent {
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
	return removed, errors.Join(errs...)
}
