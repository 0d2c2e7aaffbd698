package manifest

import (
	"fmt"
	"regexp"
	"time"

	"github.com/dlclark/regexp2"
)

// RegexMatchTimeout bounds one match of a backtracking (ECMAScript) version pattern.
const RegexMatchTimeout = 100 * time.Millisecond

// VersionPattern is a compiled version_check.parse regex. Go's RE2 engine is used when the pattern
// compiles there; otherwise the ECMAScript engine of dlclark/regexp2 with a match timeout.
type VersionPattern struct {
	Engine string // "re2" or "ecmascript"
	re     *regexp.Regexp
	re2    *regexp2.Regexp
}

// CompileVersionPattern compiles p and checks it has at least one capture group.
func CompileVersionPattern(p string) (*VersionPattern, error) {
	if re, err := regexp.Compile(p); err == nil {
		if re.NumSubexp() < 1 {
			return nil, errNoGroup
		}
		return &VersionPattern{Engine: "re2", re: re}, nil
	}
	re2, err := regexp2.Compile(p, regexp2.ECMAScript)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	re2.MatchTimeout = RegexMatchTimeout
	if len(re2.GetGroupNumbers()) < 2 {
		return nil, errNoGroup
	}
	return &VersionPattern{Engine: "ecmascript", re2: re2}, nil
}

var errNoGroup = fmt.Errorf("has no capture group")

// Find returns the first capture group of the first match in s.
func (p *VersionPattern) Find(s string) (string, bool) {
	if p.re != nil {
		m := p.re.FindStringSubmatch(s)
		if m == nil {
			return "", false
		}
		return m[1], true
	}
	m, err := p.re2.FindStringMatch(s)
	if err != nil || m == nil {
		return "", false
	}
	g := m.GroupByNumber(1)
	if g == nil || len(g.Captures) == 0 {
		return "", false
	}
	return g.String(), true
}
