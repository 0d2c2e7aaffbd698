package wspath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCheck: what leaves the workspace and what stays, lexically and through symlinks. A leading
// ':' is git pathspec magic (:/x and :(top)x name the repository's top, :!x excludes, :(glob)
// globs): refused, with ./:name as the spelling of a file named so.
func TestCheck(t *testing.T) {
	ws := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ":name"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]string{
		"a.txt":             "",
		"sub/../a.txt":      "",
		"./:name":           "",
		"dir/:x":            "",
		"s3://bucket/key":   "",
		"":                  "",
		"/etc/passwd":       "is an absolute path",
		"~/x":               "starts with ~ (a home directory)",
		"../x":              "leaves the workspace",
		"a/../../x":         "leaves the workspace",
		"out/passwd":        "resolves through a symlink to a place outside the workspace",
		":(top)../x":        "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x",
		":/etc":             "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x",
		":(glob)**":         "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x",
		":!x":               "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x",
		":name":             "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x",
		":(attr:x)":         "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x",
		":(exclude,top)..x": "starts with ':', which git reads as pathspec magic (:/, :(top), :!, …); write a file named :x as ./:x",
	} {
		if got, err := Check(ws, v); err != nil || got != want {
			t.Errorf("Check(%q) = %q, %v; want %q", v, got, err, want)
		}
	}
}
