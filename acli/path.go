package acli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checkPath enforces spec §4.2.3 on a `format: path` value v (displayed as display). It is
// PATH_TRAVERSAL_BLOCKED when v
//
//   - is absolute (/x, \x, or a drive such as C:\x or C:x) or starts with ~ (a home directory for
//     any program that expands it; no shell expands it here),
//   - escapes the workspace once cleaned (.., ../x, a/../../x), or
//   - resolves outside the workspace through a symlink: the longest prefix of v that exists is
//     resolved with filepath.EvalSymlinks (so .. after a symlink is taken physically, as the
//     kernel would), the rest is appended lexically, and the result must lie inside the resolved
//     workspace. A prefix ending in a symlink that cannot be resolved (dangling, looping) is
//     refused too, since its target cannot be checked.
//
// The value itself is passed on unchanged. With no workspace only the lexical checks run. An empty
// value is not a path and is left to the schema.
func checkPath(workspace, display, v string) *Error {
	if v == "" {
		return nil
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, `\`) || hasDrive(v) {
		return blocked(display, v, "is an absolute path")
	}
	if strings.HasPrefix(v, "~") {
		return blocked(display, v, "starts with ~ (a home directory)")
	}
	if c := filepath.ToSlash(filepath.Clean(v)); c == ".." || strings.HasPrefix(c, "../") {
		return blocked(display, v, "leaves the workspace")
	}
	if workspace == "" {
		return nil
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return &Error{Code: ExecutionError, Message: fmt.Sprintf("Execution failed: the workspace cannot be resolved: %v", err), Hint: "Check that the workspace directory exists"}
	}
	parts := strings.Split(v, "/")
	i := len(parts)
	for ; i > 0; i-- {
		if _, err := os.Lstat(root + "/" + strings.Join(parts[:i], "/")); err == nil {
			break
		}
	}
	resolved := root
	if i > 0 {
		if resolved, err = filepath.EvalSymlinks(root + "/" + strings.Join(parts[:i], "/")); err != nil {
			return blocked(display, v, "goes through a symlink that cannot be resolved")
		}
	}
	final := filepath.Join(append([]string{resolved}, parts[i:]...)...)
	if rel, err := filepath.Rel(root, final); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return blocked(display, v, "resolves through a symlink to a place outside the workspace")
	}
	return nil
}

// hasDrive reports a Windows drive prefix such as C: (refused on every platform: a path meant for
// another system is not a workspace path).
func hasDrive(v string) bool {
	return len(v) >= 2 && v[1] == ':' && (v[0]|0x20 >= 'a' && v[0]|0x20 <= 'z')
}

func blocked(display, v, why string) *Error {
	return &Error{Code: PathTraversalBlocked,
		Message: fmt.Sprintf("Path traversal blocked: %s %s %s", display, quoteClip(v), why),
		Hint:    "Use a relative path inside the workspace, such as src/main.go, without .. that leaves it"}
}
