package manifest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// versionHead matches the numeric head of a version string: an optional v, one to three
// dot-separated numbers, and the rest.
var versionHead = regexp.MustCompile(`^[vV]?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$`)

// realPrerelease matches the suffixes kept as semver prereleases; every other suffix (distro
// revisions such as -0+deb12u1 or -3ubuntu5, -static, .windows.1) is dropped.
var realPrerelease = regexp.MustCompile(`(?i)^-((?:alpha|beta|rc|pre|preview|dev|next|canary|nightly)(?:[.\-]?[0-9a-z]+)*)`)

// NormalizeVersion turns what a version_check regex captured into a semver version: a leading v is
// dropped, two-part versions are padded (1.6 → 1.6.0), leading zeros are dropped (2024.08.06 →
// 2024.8.6), build metadata and distro suffixes are dropped (2.4.0+dfsg1 → 2.4.0,
// 5.1.6-0+deb12u1 → 5.1.6), and real prereleases are kept (2.45.0-rc.1).
func NormalizeVersion(s string) (*semver.Version, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ':'); i > 0 && isDigits(s[:i]) { // Debian epoch, 1:2.39.5
		s = s[i+1:]
	}
	m := versionHead.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("%q does not start with a version number", s)
	}
	parts := []string{m[1], m[2], m[3]}
	for i, p := range parts {
		if p == "" {
			p = "0"
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: version component %q is too large", s, p)
		}
		parts[i] = strconv.FormatUint(n, 10)
	}
	v := strings.Join(parts, ".")
	if pm := realPrerelease.FindStringSubmatch(m[4]); pm != nil {
		v += "-" + strings.TrimRight(pm[1], ".-")
	}
	return semver.StrictNewVersion(v)
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// VersionRange is an npm-style semver range.
type VersionRange struct {
	raw  string
	alts []rangeAlt // joined by ||
}

type rangeAlt struct {
	c          *semver.Constraints
	prerelease []*semver.Version // comparators' versions that carry a prerelease
}

var rangeVersions = regexp.MustCompile(`\d+\.\d+\.\d+-[0-9A-Za-z.\-]+`)

// ParseRange parses an npm-style range with npm's rules: an empty range (or *) allows any release;
// alternatives are joined by ||; comparators within one are separated by spaces (a comma, which npm
// rejects, is refused); a prerelease version satisfies a range only when a comparator of the
// matching alternative names a prerelease of the same major.minor.patch.
func ParseRange(s string) (*VersionRange, error) {
	r := &VersionRange{raw: s}
	if strings.Contains(s, ",") {
		return nil, fmt.Errorf("range %q contains a comma, which npm ranges do not allow", s)
	}
	for _, alt := range strings.Split(s, "||") {
		alt = strings.TrimSpace(alt)
		if alt == "" {
			alt = "*"
		}
		c, err := semver.NewConstraint(alt)
		if err != nil {
			return nil, fmt.Errorf("range %q: %w", s, err)
		}
		ra := rangeAlt{c: c}
		for _, vs := range rangeVersions.FindAllString(alt, -1) {
			if v, err := semver.NewVersion(vs); err == nil {
				ra.prerelease = append(ra.prerelease, v)
			}
		}
		r.alts = append(r.alts, ra)
	}
	return r, nil
}

// String returns the range as written.
func (r *VersionRange) String() string { return r.raw }

// Contains reports whether v satisfies the range.
func (r *VersionRange) Contains(v *semver.Version) bool {
	for _, a := range r.alts {
		if v.Prerelease() != "" {
			same := false
			for _, p := range a.prerelease {
				if p.Major() == v.Major() && p.Minor() == v.Minor() && p.Patch() == v.Patch() {
					same = true
				}
			}
			if !same {
				continue
			}
		}
		if a.c.Check(v) {
			return true
		}
	}
	return false
}
