package output

import (
	"cmp"
	"regexp"
	"strings"
)

// CategoryPermission is the category of a tool call the operating system or the sandbox refused
// access to a path (EACCES, EPERM, EROFS). It is clihost's addition to the provider protocol's ten
// categories (like "resource" for a per-call limit): the fix is a grant or a file's permissions,
// never a login.
const CategoryPermission = "permission"

// refusalText is the text CLIs print for EACCES, EPERM and EROFS (strerror, Go's syscall errors,
// Rust's and Python's) or the errno names themselves.
var refusalText = regexp.MustCompile(`(?i)permission denied|operation not permitted|read-only file system|\b(?:EACCES|EPERM|EROFS)\b`)

// sshRefusal is ssh refusing a key or password ("git@github.com: Permission denied (publickey)."):
// a credential problem on a remote, not a path.
var sshRefusal = regexp.MustCompile(`(?i)permission denied \((?:publickey|password|keyboard-interactive|gssapi|hostbased)`)

// The formats a refused path is taken from, in the order tried on each line that reports a refusal.
// Each captures the path in its first group.
var refusalFormats = []*regexp.Regexp{
	// Node: "EACCES: permission denied, open '/x'".
	regexp.MustCompile(`(?i)\b(?:EACCES|EPERM|EROFS): [^,]*, \w+ '([^']+)'`),
	// Python: "PermissionError: [Errno 13] Permission denied: '/x'".
	regexp.MustCompile(`(?i)\[Errno (?:1|13|30)\] [^:]+: '([^']+)'`),
	// Go's *fs.PathError: "open /x: permission denied", "fork/exec /x: permission denied".
	regexp.MustCompile(`(?i)\b(?:open|openat|stat|lstat|mkdir|mkdirat|remove|unlink|unlinkat|rename|chdir|readlink|creat|chmod|chown|truncate|exec|fork/exec|readdirent|symlink|link) (/\S*|\.{1,2}/\S*|~/\S*): (?:permission denied|operation not permitted|read-only file system)`),
	// A C call with its quoted argument: git's `error: open("x"): Permission denied`.
	regexp.MustCompile(`(?i)\b\w+\("([^"]+)"\):\s*(?:permission denied|operation not permitted|read-only file system)`),
	// strerror after the path, possibly quoted: "cat: /x: Permission denied", "rg: /x: Permission
	// denied (os error 13)", "jq: error: Could not open /x: Permission denied", "ls: cannot open
	// directory '/x': Permission denied", "error: could not lock config file .git/config: …".
	regexp.MustCompile(`(?i)(?:^|\s)(['"‘]?[^\s'"‘’]+['"’]?):\s*(?:permission denied|operation not permitted|read-only file system)`),
	// A quoted absolute path elsewhere on the line: git's "could not open '/x' for reading:
	// Permission denied".
	regexp.MustCompile(`['"‘]((?:/|~/)[^'"‘’]*)['"’]`),
}

// bareFormat is the index in refusalFormats of the format whose unquoted word must read as a path.
const bareFormat = 4

// coreutilsLine is the "program: path: strerror" layout, in which a bare relative name is a path.
var coreutilsLine = regexp.MustCompile(`^[\w.+-]+: ([^\s:]+): `)

// Refusal reports whether text (a CLI's stderr) says that access was refused (EACCES, EPERM, EROFS),
// and the path it names, taken conservatively from the first line that has one in a common format
// (coreutils, jq, rg, git, Go, Python, Node); a line that is only a warning ("warning: unable to
// access …") is used when no other line names a path. path is "" when no line names a path; a
// refusal by ssh of a key or password is not one.
func Refusal(text string) (path string, refused bool) {
	warned := ""
	for line := range strings.SplitSeq(text, "\n") {
		if !refusalText.MatchString(line) || sshRefusal.MatchString(line) {
			continue
		}
		refused = true
		p := refusedPath(line)
		switch {
		case p == "":
		case warning.MatchString(line):
			warned = cmp.Or(warned, p)
		default:
			return p, true
		}
	}
	return warned, refused
}

// warning is a line a CLI prints as a warning, not as its error.
var warning = regexp.MustCompile(`(?i)^\s*(?:\S+: )?warning:`)

// refusedPath returns the path one refusal line names, or "".
func refusedPath(line string) string {
	line = strings.TrimSpace(line)
	for i, re := range refusalFormats {
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			p, quoted := unquote(m[1])
			if i == bareFormat && !quoted && !pathLike(p) && !bareInCoreutilsLine(line, p) {
				continue
			}
			if p != "" && !strings.Contains(p, "://") {
				return p
			}
		}
	}
	return ""
}

// unquote strips one pair of quotes, reporting whether there was one.
func unquote(s string) (string, bool) {
	for _, q := range [][2]string{{"'", "'"}, {`"`, `"`}, {"‘", "’"}} {
		if len(s) >= len(q[0])+len(q[1]) && strings.HasPrefix(s, q[0]) && strings.HasSuffix(s, q[1]) {
			return s[len(q[0]) : len(s)-len(q[1])], true
		}
	}
	return strings.Trim(s, `'"‘’`), false
}

// pathLike reports whether an unquoted word reads as a path: absolute, home- or dot-relative, or
// with a directory separator (and not an address such as git@github.com).
func pathLike(s string) bool {
	return strings.Contains(s, "/") && !strings.Contains(s, "@")
}

// bareInCoreutilsLine reports whether p is the path of a "program: p: strerror" line with a
// file name (an extension), such as "cat: notes.txt: Permission denied".
func bareInCoreutilsLine(line, p string) bool {
	m := coreutilsLine.FindStringSubmatch(line)
	return m != nil && m[1] == p && !strings.Contains(p, "@") && strings.Contains(strings.TrimPrefix(p, "."), ".")
}
