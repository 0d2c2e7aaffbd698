package cobra

import (
	"testing"

	"github.com/clihost/clihost/importer/cobra/usage"
)

// TestPathInputsMarked: a flag or positional whose name (or value name) says it holds a file,
// path or directory is imported with format: path, so the host keeps it in the workspace; other
// strings are not.
func TestPathInputsMarked(t *testing.T) {
	format := func(s map[string]any) any {
		if it, ok := s["items"].(map[string]any); ok {
			return it["format"]
		}
		return s["format"]
	}
	for _, c := range []struct {
		f    Flag
		want any
	}{
		{Flag{Name: "filename", Type: "strings", TypeKnown: true}, "path"},
		{Flag{Name: "kubeconfig", Type: "string", TypeKnown: true}, "path"},
		{Flag{Name: "output-dir", Type: "string", TypeKnown: true}, "path"},
		{Flag{Name: "body-file", Type: "string", TypeKnown: true}, "path"},
		{Flag{Name: "template", Type: "file"}, "path"},
		{Flag{Name: "repo", Type: "OWNER/REPO"}, nil},
		{Flag{Name: "profile", Type: "string", TypeKnown: true}, nil},
		{Flag{Name: "max-files", Type: "int", TypeKnown: true}, nil},
	} {
		if got := format(FlagProperty(&c.f).Schema); got != c.want {
			t.Errorf("--%s (%s): format %v, want %v", c.f.Name, c.f.Type, got, c.want)
		}
	}
	for _, c := range []struct {
		a    usage.Arg
		want any
	}{
		{usage.Arg{Name: "file"}, "path"},
		{usage.Arg{Name: "paths", Variadic: true}, "path"},
		{usage.Arg{Name: "name"}, nil},
	} {
		if got := format(ArgProperty(c.a, "x").Schema); got != c.want {
			t.Errorf("<%s>: format %v, want %v", c.a.Name, got, c.want)
		}
	}
}
