package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clihost/clihost/output"
)

// Shell completion is cobra's: `clihostctl completion bash|zsh|fish|powershell` prints a script
// that asks `clihostctl __complete ARGS…` for candidates. addCompletions gives every command
// whose first argument is BUNDLE the bundles' names, a BUNDLE TOOL command the chosen bundle's
// tools, and flags their values: the words a --format takes, folders for --workspace, --bundles,
// --out and --dir.

// flagWords are the values of enumerated flags, by command name and flag name ("" for any command);
// lint's are the formats it has a writer for, so a new one completes too.
var flagWords = map[[2]string][]string{
	{"lint", "format"}:     slices.Sorted(maps.Keys(lintWriters)),
	{"test", "format"}:     {"text", "tap", "json"},
	{"parse", "format"}:    {output.ProviderText, output.ProviderJSON, output.ProviderStreamJSON},
	{"classify", "format"}: {output.ProviderText, output.ProviderJSON, output.ProviderStreamJSON},
	{"", "color"}:          {"auto", "always", "never"},
}

// dirFlags are the flags that name a folder.
var dirFlags = []string{"workspace", "bundles", "out", "dir"}

// completionTimeout bounds how long completing a bundle name waits for the daemon.
const completionTimeout = 500 * time.Millisecond

// addCompletions registers the argument and flag completions of root's commands.
func addCompletions(root *cobra.Command, g *globalOptions) {
	for _, name := range dirFlags {
		if root.PersistentFlags().Lookup(name) != nil {
			_ = root.RegisterFlagCompletionFunc(name, dirCompletion)
		}
	}
	if root.PersistentFlags().Lookup("color") != nil {
		_ = root.RegisterFlagCompletionFunc("color", wordsCompletion(wordsOf("", "color")))
	}
	walk(root, func(cmd *cobra.Command) {
		args := strings.Fields(cmd.Use)[1:]
		if len(args) > 0 && strings.Trim(args[0], "[]") == "BUNDLE" && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = bundleArgs(g, len(args) > 1 && args[1] == "TOOL")
		}
		cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if words := wordsOf(cmd.Name(), f.Name); words != nil {
				_ = cmd.RegisterFlagCompletionFunc(f.Name, wordsCompletion(words))
			} else if slices.Contains(dirFlags, f.Name) {
				_ = cmd.RegisterFlagCompletionFunc(f.Name, dirCompletion)
			}
		})
	})
}

// wordsOf returns the values command's flag takes, or nil when they are not a fixed set.
func wordsOf(command, flag string) []string {
	if w, ok := flagWords[[2]string{command, flag}]; ok {
		return w
	}
	return flagWords[[2]string{"", flag}]
}

// wordsCompletion completes to those of words that start with what was typed.
func wordsCompletion(words []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return matching(words, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

// walk calls fn for cmd and each command below it.
func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		walk(c, fn)
	}
}

// dirCompletion completes folder names.
func dirCompletion(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// bundleArgs completes a BUNDLE argument and, with tool, then the TOOL of that bundle.
func bundleArgs(g *globalOptions, tool bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch {
		case len(args) == 0:
			return matching(bundleNames(cmd.Context(), g), prefix), cobra.ShellCompDirectiveNoFileComp
		case len(args) == 1 && tool:
			return matching(toolNames(g, args[0]), prefix), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// Names and descriptions may come from a hostile ./.cli (a cloned repository's) or daemon: a
// name with whitespace or control characters is dropped, a description's made visible.

// bundleNames are the bundles the daemon serves (when one answers in time) and those of the local
// folders and catalog (--bundles, $CLIHOST_BUNDLES, ./.cli): ids, with their short description.
func bundleNames(ctx context.Context, g *globalOptions) []cobra.Completion {
	seen := map[string]string{}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	if st, err := g.client().Status(ctx, ""); err == nil {
		for _, b := range st {
			if id, _, _ := strings.Cut(b.Key, "@"); isWord(id) {
				seen[id] = ""
			}
		}
	}
	if reg, err := g.registry(); err == nil {
		for _, b := range reg.Bundles() {
			if b.CLI != nil && isWord(b.ID()) {
				seen[b.ID()] = summary(b.CLI.Description)
			}
		}
	}
	out := make([]cobra.Completion, 0, len(seen))
	for id, desc := range seen {
		out = append(out, cobra.CompletionWithDesc(id, desc))
	}
	slices.Sort(out)
	return out
}

// toolNames are the tools of the bundle named bundle, each as its dotted command path (pr.list),
// or its TOOL.md id for a tool of a CLI without subcommands, with the tool's name.
func toolNames(g *globalOptions, bundle string) []cobra.Completion {
	b, err := resolveBundle(g, bundle)
	if err != nil || b.CLI == nil {
		return nil
	}
	var out []cobra.Completion
	for _, t := range b.Tools {
		name := strings.Join(t.Path, ".")
		if name == "" {
			name = t.Tool.ID
		}
		if isWord(name) {
			out = append(out, cobra.CompletionWithDesc(name, plain(firstLine(t.Tool.Name))))
		}
	}
	slices.Sort(out)
	return out
}

// isWord reports whether a name from the daemon may be a candidate: printable, without spaces
// (a newline or tab would inject candidates or descriptions into the shell's list).
func isWord(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || !unicode.IsPrint(r) })
}

// matching keeps the candidates starting with prefix.
func matching(cands []cobra.Completion, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// summary is the first sentence of a description, for a completion's one-line hint.
func summary(s string) string {
	s = firstLine(strings.TrimSpace(s))
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return plain(s)
}
