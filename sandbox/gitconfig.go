package sandbox

import (
	"regexp"
	"slices"
	"strings"
)

// gitEntry is one variable of a git config file: section and name lowercased (git compares them
// case-insensitively), the subsection as written, and the value (hasValue false for a bare
// `name` line, which git reads as true).
type gitEntry struct {
	section, sub, name string
	// spelled is the variable name as written, kept for the rewritten file.
	spelled  string
	value    string
	hasValue bool
}

// same reports whether o sets the same variable, in the same subsection, to the same value.
func (e gitEntry) same(o gitEntry) bool {
	return e.section == o.section && e.sub == o.sub && e.name == o.name && e.value == o.value && e.hasValue == o.hasValue
}

// key is section.name or section.<sub>.name with a "*" for any subsection.
func (e gitEntry) key() string {
	if e.sub == "" {
		return e.section + "." + e.name
	}
	return e.section + ".*." + e.name
}

// gitConfigAllowed are the variables a git config written by a sandboxed call may keep: what
// `git init`, `git clone` (partial clones too), `git submodule`, `git worktree` and `git
// sparse-checkout` write, and a few settings tools set to quiet git (pull, push, fetch, line
// endings); none names a program, a file to include, a hook directory or a transport command. The
// value check, when set, must pass too.
var gitConfigAllowed = map[string]func(v string, ctx valueContext) bool{
	"core.repositoryformatversion": nil,
	"core.filemode":                nil,
	"core.bare":                    nil,
	"core.logallrefupdates":        nil,
	"core.ignorecase":              nil,
	"core.precomposeunicode":       nil,
	"core.symlinks":                nil,
	"core.sparsecheckout":          nil,
	"core.sparsecheckoutcone":      nil,
	"core.worktree":                worktreeInside,
	"index.sparse":                 nil,
	"extensions.objectformat":      nil,
	"extensions.worktreeconfig":    nil,
	"extensions.preciousobjects":   nil,
	"extensions.partialclone":      nil,
	"extensions.noop":              nil,
	"remote.*.url":                 safeURL,
	"remote.*.pushurl":             safeURL,
	"remote.*.fetch":               nil,
	"remote.*.push":                nil,
	"remote.*.tagopt":              nil,
	"remote.*.mirror":              nil,
	"remote.*.prune":               nil,
	"remote.*.promisor":            nil,
	"remote.*.partialclonefilter":  nil,
	"branch.*.remote":              safeURL,
	"branch.*.pushremote":          safeURL,
	"branch.*.merge":               nil,
	"branch.*.rebase":              nil,
	"submodule.active":             nil,
	"submodule.*.url":              safeURL,
	"submodule.*.active":           nil,
	"user.name":                    nil,
	"user.email":                   nil,
	"pull.rebase":                  nil,
	"pull.ff":                      nil,
	"push.default":                 nil,
	"push.autosetupremote":         nil,
	"fetch.prune":                  nil,
	"init.defaultbranch":           nil,
	"core.autocrlf":                nil,
	"core.eol":                     nil,
}

// valueContext is what a value check may need to know: where the config file lies.
type valueContext struct {
	// resolveInside resolves a path relative to the git directory without following symlinks and
	// reports whether it lies in a writable root.
	resolveInside func(p string) bool
	// before are the variables the file held before the call: kept whatever they are, since the
	// call did not choose them.
	before []gitEntry
}

// safeURL refuses what makes git run a program of the value's choosing: an option ("-…", as an
// ssh host or upload-pack argument) and a transport helper ("ext::sh -c …", "fd::", any
// "<helper>::address", which runs git-remote-<helper>).
func safeURL(v string, _ valueContext) bool {
	return !strings.HasPrefix(v, "-") && !strings.Contains(v, "::") && !strings.ContainsAny(v, "\n\r\x00")
}

// worktreeInside keeps core.worktree (which submodule git directories need) only when it names a
// directory inside a writable root: elsewhere, the owner's next checkout would write there.
func worktreeInside(v string, ctx valueContext) bool {
	return ctx.resolveInside != nil && ctx.resolveInside(v)
}

var (
	gitSectionLine = regexp.MustCompile(`^[ \t]*\[([A-Za-z0-9-]+)(?:[ \t]+"([^"\\]*)")?\][ \t]*$`)
	gitNameLine    = regexp.MustCompile(`^[ \t]*([A-Za-z][A-Za-z0-9-]*)[ \t]*(?:(=)(.*))?$`)
)

// parseGitConfig reads a git config file line by line. strict is true when every line is in the
// plain subset git itself writes (section headers alone on their line, one variable per line, no
// continuation lines, no escapes other than \" \\ \n \t \b inside a value, no NUL, CR or BOM), where
// git's reading and this one cannot differ. A line outside it is skipped, and so are the variables
// of a section whose header is skipped.
func parseGitConfig(data []byte) (entries []gitEntry, strict bool) {
	strict = !strings.ContainsAny(string(data), "\x00\r") && !strings.HasPrefix(string(data), "\xef\xbb\xbf")
	section, sub, inSection := "", "", false
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r") // git reads CRLF as LF
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed == "" || trimmed[0] == '#' || trimmed[0] == ';' {
			continue
		}
		if m := gitSectionLine.FindStringSubmatch(line); m != nil {
			section, sub, inSection = strings.ToLower(m[1]), m[2], true
			continue
		}
		if trimmed[0] == '[' {
			strict, inSection = false, false
			continue
		}
		m := gitNameLine.FindStringSubmatch(line)
		if m == nil || !inSection {
			strict = false
			continue
		}
		e := gitEntry{section: section, sub: sub, name: strings.ToLower(m[1]), spelled: m[1]}
		if m[2] != "" {
			v, ok := gitValue(m[3])
			if !ok {
				strict = false
				continue
			}
			e.value, e.hasValue = v, true
		}
		entries = append(entries, e)
	}
	return entries, strict
}

// gitValue decodes a value as git's parse_value does: leading blanks dropped, trailing ones
// trimmed outside quotes, quotes removed, a comment (# or ;) outside quotes ending it. ok is false
// for what the strict subset leaves out: an unknown escape, a trailing backslash (a continuation
// line) or an unterminated quote.
func gitValue(raw string) (string, bool) {
	var b strings.Builder
	quoted, spaces := false, 0
	raw = strings.TrimLeft(raw, " \t")
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case !quoted && (c == ' ' || c == '\t'):
			spaces++
			continue
		case !quoted && (c == '#' || c == ';'):
			return b.String(), true
		}
		b.WriteString(strings.Repeat(" ", spaces))
		spaces = 0
		switch c {
		case '"':
			quoted = !quoted
		case '\\':
			if i+1 >= len(raw) {
				return "", false
			}
			i++
			switch raw[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case '"', '\\':
				b.WriteByte(raw[i])
			default:
				return "", false
			}
		default:
			b.WriteByte(c)
		}
	}
	if quoted {
		return "", false
	}
	return b.String(), true
}

// filterGitConfig keeps the allowed variables of a config file. clean is true when the file
// may stay as it is: strictly parsed, nothing dropped. Otherwise out is the file rewritten with
// the kept variables only, and dropped names what went (section.name).
func filterGitConfig(data []byte, ctx valueContext) (out []byte, dropped []string, clean bool) {
	entries, strict := parseGitConfig(data)
	var kept []gitEntry
	for _, e := range entries {
		check, ok := gitConfigAllowed[e.key()]
		if (ok && (check == nil || check(e.value, ctx))) || slices.ContainsFunc(ctx.before, e.same) {
			kept = append(kept, e)
			continue
		}
		dropped = append(dropped, e.key())
	}
	if strict && len(dropped) == 0 {
		return nil, nil, true
	}
	return renderGitConfig(kept), dropped, false
}

// renderGitConfig writes entries in git's own format, quoting values as git does.
func renderGitConfig(entries []gitEntry) []byte {
	var b strings.Builder
	cur := ""
	for _, e := range entries {
		header := "[" + e.section + "]"
		if e.sub != "" {
			header = "[" + e.section + ` "` + e.sub + `"]`
		}
		if header != cur {
			b.WriteString(header + "\n")
			cur = header
		}
		b.WriteString("\t" + e.spelled)
		if e.hasValue {
			b.WriteString(" = " + quoteGitValue(e.value))
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// quoteGitValue quotes v when git would need it to read it back unchanged.
func quoteGitValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`)
	esc := r.Replace(v)
	if v != strings.TrimSpace(v) || strings.ContainsAny(v, "#;") {
		return `"` + esc + `"`
	}
	return esc
}
