package cobra

import (
	"strings"
	"testing"

	"github.com/clihost/clihost/manifest"
)

// TestFlagValuesAreGlued: every flag the importer writes passes its value glued to the option
// (--name=VALUE), so a value starting with '-' reaches the flag instead of being refused as a
// possible option (issue 12); booleans are flag() or --name=VALUE.
func TestFlagValuesAreGlued(t *testing.T) {
	types := []string{"bool", "string", "int", "uint", "count", "float64", "duration", "ip", "ipNet", "ipMask", "bytesHex",
		"strings", "ints", "float64Slice", "bools", "stringArray", "stringToString", "stringToInt", "custom"}
	for _, typ := range types {
		for _, def := range []string{"", "true"} {
			p := FlagProperty(&Flag{Name: "opt", Type: typ, TypeKnown: typ != "custom", Default: def})
			tok, err := manifest.ParseTemplateToken(p.Argv)
			if err != nil {
				t.Fatalf("%s: %q: %v", typ, p.Argv, err)
			}
			e := tok.Whole()
			switch {
			case e == nil && strings.HasPrefix(p.Argv, "--opt="):
			case e != nil && e.Filter == manifest.FilterFlag:
			case e != nil && e.Filter == manifest.FilterOptional && strings.HasSuffix(e.Args[0], "="):
			default:
				t.Errorf("%s (default %q): %q passes its value as an argument of its own", typ, def, p.Argv)
			}
		}
	}
}
