package cobra

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clihost/clihost/importer/cobra/usage"
)

// TestPathInputsMarked: a flag or positional whose name (or value name) says it holds a file,
// path or directory is imported with format: path, so the host keeps it in the workspace; other
// strings are not.
func TestPathInputsMarked(t *testing.T) {
	format := func(s *jsonschema.Schema) string {
		if s.Items != nil {
			return s.Items.Format
		}
		return s.Format
	}
	for _, c := range []struct {
		f    Flag
		want string
	}{
		{Flag{Name: "filename", Type: "strings", TypeKnown: true}, "path"},
		{Flag{Name: "kubeconfig", Type: "string", TypeKnown: true}, "path"},
		{Flag{Name: "output-dir", Type: "string", TypeKnown: true}, "path"},
		{Flag{Name: "body-file", Type: "string", TypeKnown: true}, "path"},
		{Flag{Name: "template", Type: "file"}, "path"},
		{Flag{Name: "repo", Type: "OWNER/REPO"}, ""},
		{Flag{Name: "profile", Type: "string", TypeKnown: true}, ""},
		{Flag{Name: "max-files", Type: "int", TypeKnown: true}, ""},
	} {
		if got := format(FlagProperty(&c.f).Schema); got != c.want {
			t.Errorf("--%s (%s): format %v, want %v", c.f.Name, c.f.Type, got, c.want)
		}
	}
	for _, c := range []struct {
		a    usage.Arg
		want string
	}{
		{usage.Arg{Name: "file"}, "path"},
		{usage.Arg{Name: "paths", Variadic: true}, "path"},
		{usage.Arg{Name: "name"}, ""},
	} {
		if got := format(ArgProperty(c.a, "x").Schema); got != c.want {
			t.Errorf("<%s>: format %v, want %v", c.a.Name, got, c.want)
		}
	}
}
