// Package wspath checks that a caller-supplied path (an input declared `format: path`) stays
// inside the workspace: the rule of AIP-29 §4.2.3 (PATH_TRAVERSAL_BLOCKED), shared by the host and
// ACLI so that every front end enforces it.
package wspath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Check reports why v leaves workspace, or "" when it stays inside. v is refused when it
//
//   - is absolute (/x, \x, or a drive such as C:\x or C:x) or starts with ~ (a home directory for
//     any program that expands it; no shell expands it here),
//   - starts with ':', which git (and every tool that hands paths to git) reads as pathspec
//     magic rather than a name: :/x and :(top)x are relative to the repository's top, not the
//     workspace, :(top)../x, :!x, :(exclude)x, :(glob)** and :(attr:…) change what the path means;
//     the lexical checks below would see a relative name. A file whose name starts with ':' is
//     written ./:name, which git and every other program read as that file,
//   - escapes the workspace once cleaned (.., ../x, a/../../x), or
//   - resolves outside the workspace through a symlink: the longest prefix of v that exists is
//     resolved with filepath.EvalSymlinks (so .. after a symlink is taken physically, as the
//     kernel would), the rest is appended lexically, and the result must lie inside the resolved
//     workspace. A prefix ending in a symlink that cannot be resolved (dangling, looping) is
//     refused too, since its target cannot be checked.
//
// With no workspace only the lexical checks run. An empty value is not a path and is left to the
// schema. err is set only when the workspace itself cannot be resolved.
func Check(workspace, v string) (why string, err error) {
	if v == "" {
		return "", nil
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, `\`) || hasDrive(v) {
		return "is an absolute path", nil
	}
	if strings.HasPrefix(v, "~") {
		return "starts with ~ (a home directory)", nil
	}
	if strings.HasPrefix(v, ":") {
		return "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x", nil
	}
	if c := filepath.ToSlash(filepath.Clean(v)); c == ".." || strings.HasPrefix(c, "../") {
		return "leaves the workspace", nil
	}
	if workspace == "" {
		return "", nil
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("the workspace cannot be resolved: %w", err)
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
			return "goes through a symlink that cannot be resolved", nil
		}
	}
	final := filepath.Join(append([]string{resolved}, parts[i:]...)...)
	if rel, err := filepath.Rel(root, final); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "resolves through a symlink to a place outside the workspace", nil
	}
	return "", nil
}

// hasDrive reports a Windows drive prefix such as C: (refused on every platform: a path meant for
// another system is not a workspace path).
func hasDrive(v string) bool {
	return len(v) >= 2 && v[1] == ':' && (v[0]|0x20 >= 'a' && v[0]|0x20 <= 'z')
}

// Walk calls fn for every string in input that schema declares `format: path`: a property, an
// array's items, nested objects, at the JSON pointer of the value. It follows properties and
// items only (what argv templates reach); it stops at the first error fn returns.
func Walk(schema map[string]any, v any, ptr string, fn func(ptr, s string) error) error {
	switch t := v.(type) {
	case string:
		if schema["format"] == "path" {
			return fn(ptr, t)
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for i, x := range t {
			if err := Walk(items, x, fmt.Sprintf("%s/%d", ptr, i), fn); err != nil {
				return err
			}
		}
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for k, x := range t {
			ps, _ := props[k].(map[string]any)
			if err := Walk(ps, x, ptr+"/"+escape(k), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
