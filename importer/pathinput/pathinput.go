// Package pathinput marks imported inputs that hold file system paths with `format: path`, so
// that the host keeps their values inside the workspace (PATH_TRAVERSAL_BLOCKED). Importers know
// only names, so the mark follows the name: a flag, positional or property called file, path,
// dir, … (or one of those words joined by - _ or .).
package pathinput

import (
	"regexp"

	"github.com/google/jsonschema-go/jsonschema"
)

// words are the name words that say a value is a path.
var words = regexp.MustCompile(`(?i)(^|[-_.])(file|files|filename|filenames|path|paths|filepath|dir|dirs|directory|directories|folder|kubeconfig)($|[-_.])`)

// IsPathName reports whether name says its value is a file system path.
func IsPathName(name string) bool { return words.MatchString(name) }

// Mark adds format: path to a string schema, or to an array's string items, when one of names is
// a path name. A schema that already declares a format is left alone.
func Mark(s *jsonschema.Schema, names ...string) {
	isPath := false
	for _, n := range names {
		isPath = isPath || IsPathName(n)
	}
	if !isPath || s == nil {
		return
	}
	switch s.Type {
	case "string":
		if s.Format == "" {
			s.Format = "path"
		}
	case "array":
		if s.Items != nil && s.Items.Type == "string" && s.Items.Format == "" {
			s.Items.Format = "path"
		}
	}
}
