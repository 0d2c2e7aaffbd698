package argv

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Split turns a command line from a manifest (version_check.cmd, login.cmd, …) into words the way a
// POSIX shell would split and unquote them, without running a shell: quotes and backslashes group
// and escape, and anything a shell would act on — expansions ($VAR, $(…), backticks, globs are kept
// literal), pipes, redirections, lists, background jobs, assignments — is refused.
func Split(cmd string) ([]string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return nil, fmt.Errorf("command %q does not parse: %w", cmd, err)
	}
	if len(f.Stmts) != 1 {
		return nil, fmt.Errorf("command %q must be one simple command, not a list", cmd)
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Background || st.Coprocess || st.Negated || len(st.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return nil, fmt.Errorf("command %q must be one simple command: no pipes, redirections, assignments or background jobs", cmd)
	}
	words := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		if err := literalOnly(w); err != nil {
			return nil, fmt.Errorf("command %q: %w", cmd, err)
		}
		// Fields removes quotes and backslashes; with no expansions left and no ReadDir, one word in
		// gives exactly one word out (globs stay literal).
		fs, err := expand.Fields(&expand.Config{}, w)
		if err != nil || len(fs) != 1 {
			return nil, fmt.Errorf("command %q: word %q does not unquote to one word", cmd, wordText(w))
		}
		words = append(words, fs[0])
	}
	return words, nil
}

// literalOnly refuses a word that a shell would expand.
func literalOnly(w *syntax.Word) error {
	for _, p := range w.Parts {
		switch q := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, inner := range q.Parts {
				if _, ok := inner.(*syntax.Lit); !ok {
					return fmt.Errorf("word %q needs a shell to expand it", wordText(w))
				}
			}
		default:
			return fmt.Errorf("word %q needs a shell to expand it", wordText(w))
		}
	}
	return nil
}

func wordText(w *syntax.Word) string {
	var b strings.Builder
	syntax.NewPrinter().Print(&b, w)
	return b.String()
}
