package utcp

import (
	"errors"
	"slices"
	"testing"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/manifest"
)

// TestPlaceholderAfterAnOption: UTCP's own example `ls -la UTCP_ARG_path_UTCP_END` substitutes the
// value into a bash script, so "--version" there is an option. A command string does not say
// whether a short option takes the word after it (-la takes none), so the importer keeps a
// placeholder after a short option as written: a value starting with '-' is refused there at call
// time (issue 12). A placeholder the manual glues stays glued, taking any value; one after a long
// option is glued by the importer (TestGlueOptionValues).
func TestPlaceholderAfterAnOption(t *testing.T) {
	got, r := translateOne(t, "ls -la UTCP_ARG_path_UTCP_END", "grep --regexp=UTCP_ARG_p_UTCP_END -- UTCP_ARG_path_UTCP_END")
	if r != nil {
		t.Fatal(r)
	}
	want := [][]string{{"-la", "${input.path}"}, {"--regexp=${input.p}", "--", "${input.path}"}}
	for i, s := range got.steps {
		if !slices.Equal(s.Argv, want[i]) {
			t.Fatalf("step %d: %q, want %q", i, s.Argv, want[i])
		}
	}
	expand := func(i int, in map[string]any) ([]string, error) {
		toks, _, err := manifest.ParseArgv(got.steps[i].Argv)
		if err != nil {
			t.Fatal(err)
		}
		return argv.ExpandValues(toks, argv.Values{Input: in})
	}
	var ae *argv.Error
	if out, err := expand(0, map[string]any{"path": "--version"}); !errors.As(err, &ae) || ae.Code != "input_invalid" || ae.Pointer != "/path" {
		t.Fatalf("ls -la --version: %q %v", out, err)
	}
	out, err := expand(1, map[string]any{"p": "--pre=/bin/sh", "path": "-x"})
	if err != nil || !slices.Equal(out, []string{"--regexp=--pre=/bin/sh", "--", "-x"}) {
		t.Fatalf("glued and after --: %q %v", out, err)
	}
}
