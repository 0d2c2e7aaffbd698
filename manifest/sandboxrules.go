package manifest

import (
	"fmt"
	"net"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// PatternKind classifies a filesystem pattern by how the kernel sandbox can enforce it.
type PatternKind int

// The pattern kinds (research/sandbox.md §5).
const (
	PatternLiteral    PatternKind = iota // a path: one Landlock rule
	PatternSubtree                       // dir/**: one Landlock rule on dir
	PatternLastWild                      // a wildcard in the last component only: expanded at start
	PatternUnanchored                    // ** before the end, or a wildcard in a parent: deny lists only
)

// String names the kind.
func (k PatternKind) String() string {
	return [...]string{"literal", "subtree", "last-component wildcard", "unanchored"}[k]
}

const globMeta = "*?[{"

// ClassifyPattern checks an fs pattern and says how it can be enforced. Patterns are absolute,
// ~-relative (the calling user's home) or workspace-relative.
func ClassifyPattern(p string) (PatternKind, error) {
	if strings.TrimSpace(p) == "" {
		return 0, fmt.Errorf("the pattern is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return 0, fmt.Errorf("the pattern holds a NUL byte")
	}
	if strings.HasPrefix(p, "~") && p != "~" && !strings.HasPrefix(p, "~/") {
		return 0, fmt.Errorf("%q: ~user is not supported; ~ always means the calling user's home", p)
	}
	if !doublestar.ValidatePattern(p) {
		return 0, fmt.Errorf("%q is not a valid glob", p)
	}
	parts := strings.Split(strings.TrimSuffix(p, "/"), "/")
	for _, c := range parts {
		if c == ".." {
			return 0, fmt.Errorf("%q: .. is not allowed; write the path it means", p)
		}
	}
	if dotAlternative(p) {
		return 0, fmt.Errorf("%q: . or .. as a {…} alternative is not allowed; write the path it means", p)
	}
	last := len(parts) - 1
	for i, c := range parts {
		if i < last && strings.ContainsAny(c, globMeta) {
			return PatternUnanchored, nil
		}
	}
	switch {
	case parts[last] == "**":
		return PatternSubtree, nil
	case strings.Contains(parts[last], "**"):
		return PatternUnanchored, nil
	case strings.ContainsAny(parts[last], globMeta):
		return PatternLastWild, nil
	}
	return PatternLiteral, nil
}

// dotAlternative reports whether an alternative of a {…} group of p holds a path element "." or
// "..": {.,x} names the folder itself, which a pattern matched against folder entries never does.
func dotAlternative(p string) bool {
	var alts []*strings.Builder // the alternative being read in each open group
	dot := func(alt string) bool {
		for _, e := range strings.Split(alt, "/") {
			if e == "." || e == ".." {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(p); i++ {
		ch := p[i]
		switch {
		case ch == '\\' && i+1 < len(p):
			i++
			if len(alts) > 0 {
				alts[len(alts)-1].WriteByte('x') // an escaped character is never a dot element
			}
			continue
		case ch == '{':
			alts = append(alts, &strings.Builder{})
			continue
		case len(alts) > 0 && (ch == ',' || ch == '}'):
			if dot(alts[len(alts)-1].String()) {
				return true
			}
			alts[len(alts)-1].Reset()
			if ch == '}' {
				alts = alts[:len(alts)-1]
				if len(alts) > 0 {
					alts[len(alts)-1].WriteByte('x') // a nested group stands for a name, checked itself
				}
			}
			continue
		}
		if len(alts) > 0 {
			alts[len(alts)-1].WriteByte(ch)
		}
	}
	return false
}

// canonicalPattern puts a pattern in the form the coverage checks compare: cleaned, with ./ dropped.
func canonicalPattern(p string) string {
	if p == "**" {
		return "./**"
	}
	if strings.HasSuffix(p, "/**") {
		return canonicalPattern(strings.TrimSuffix(p, "/**")) + "/**"
	}
	c := path.Clean(p)
	if !strings.HasPrefix(c, "/") && !strings.HasPrefix(c, "~") && c != "." {
		c = "./" + c
	}
	return c
}

// PatternCovers reports whether everything pattern t grants is granted by pattern b.
func PatternCovers(b, t string) bool {
	b, t = canonicalPattern(b), canonicalPattern(t)
	if b == t {
		return true
	}
	if root, ok := strings.CutSuffix(b, "/**"); ok {
		tt := strings.TrimSuffix(t, "/**")
		return tt == root || strings.HasPrefix(tt, root+"/")
	}
	if !strings.ContainsAny(t, globMeta) {
		ok, _ := doublestar.Match(b, t)
		return ok
	}
	return false
}

// CheckEgressHost checks a network.egress entry: a hostname or a *. glob over one.
func CheckEgressHost(h string) error {
	if h == "*" {
		return fmt.Errorf("%q allows every host", h)
	}
	if strings.Contains(h, "://") || strings.ContainsAny(h, "/:@") {
		return fmt.Errorf("%q is not a hostname: no scheme, port, path or user", h)
	}
	name := strings.TrimPrefix(h, "*.")
	if net.ParseIP(strings.Trim(name, "[]")) != nil {
		return fmt.Errorf("%q is an IP address; egress takes hostnames, and CIDR ranges are left to AIP-29 v2", h)
	}
	if strings.Contains(name, "*") {
		return fmt.Errorf("%q: the only wildcard allowed is a leading *. label", h)
	}
	if len(name) > 253 {
		return fmt.Errorf("%q is longer than 253 characters", h)
	}
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	for _, l := range labels {
		if !isHostLabel(l) {
			return fmt.Errorf("%q: label %q is not a valid hostname label", h, l)
		}
	}
	if strings.HasPrefix(h, "*.") && len(labels) < 2 {
		return fmt.Errorf("%q is too broad: a *. glob needs at least two labels after it", h)
	}
	return nil
}

func isHostLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, r := range l {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// HostCovers reports whether egress entry b allows every host egress entry t allows.
func HostCovers(b, t string) bool {
	b, t = strings.ToLower(strings.TrimSuffix(b, ".")), strings.ToLower(strings.TrimSuffix(t, "."))
	if b == t {
		return true
	}
	if suffix, ok := strings.CutPrefix(b, "*"); ok { // ".example.com"
		return strings.HasSuffix(strings.TrimPrefix(t, "*"), suffix)
	}
	return false
}
