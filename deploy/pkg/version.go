package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// gitVersion names the checkout at root the way Go names a module version, in a form Debian and
// RPM compare in the same order: vX.Y.Z on a tagged commit is X.Y.Z; a commit after tag vX.Y.Z is
// X.Y.(Z+1)~0.TIMESTAMP.HASH (Go's pseudo-version vX.Y.(Z+1)-0.TIMESTAMP-HASH: after X.Y.Z, before
// X.Y.Z+1); without a tag 0.0.0~TIMESTAMP.HASH (v0.0.0-TIMESTAMP-HASH). TIMESTAMP is the commit's
// UTC time (yyyymmddhhmmss) and HASH its first 12 hex digits; a checkout with uncommitted changes
// gets "+dirty".
func gitVersion(root string) (string, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	info, err := git("log", "-1", "--format=%H %ct")
	if err != nil {
		return "", fmt.Errorf("reading the commit (git log -1): %w", err)
	}
	hash, ts, _ := strings.Cut(info, " ")
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(hash) < 12 {
		return "", fmt.Errorf("unexpected git log output %q", info)
	}
	stamp := time.Unix(secs, 0).UTC().Format("20060102150405") + "." + hash[:12]
	v := "0.0.0~" + stamp
	if tag, err := git("describe", "--tags", "--abbrev=0", "--match", "v[0-9]*"); err == nil {
		v, err = afterTag(tag, stamp, git)
		if err != nil {
			return "", err
		}
	}
	if dirty, err := git("status", "--porcelain", "--untracked-files=no"); err != nil {
		return "", fmt.Errorf("git status: %w", err)
	} else if dirty != "" {
		v += "+dirty"
	}
	return v, nil
}

// semverTag is a release tag: vMAJOR.MINOR.PATCH.
var semverTag = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

// afterTag is the version of HEAD given its nearest tag: the tag's when HEAD is the tagged commit,
// else the next patch release's pre-release named by stamp.
func afterTag(tag, stamp string, git func(...string) (string, error)) (string, error) {
	m := semverTag.FindStringSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("tag %s is not vMAJOR.MINOR.PATCH: pass -version", tag)
	}
	n, err := git("rev-list", "--count", tag+"..HEAD")
	if err != nil {
		return "", fmt.Errorf("git rev-list %s..HEAD: %w", tag, err)
	}
	if n == "0" {
		return m[1] + "." + m[2] + "." + m[3], nil
	}
	patch, _ := strconv.Atoi(m[3])
	return fmt.Sprintf("%s.%s.%d~0.%s", m[1], m[2], patch+1, stamp), nil
}

// versionChars are what a version may hold in both formats (Debian's upstream version without
// '-' and ':', RPM's version).
var versionChars = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

// checkVersion refuses a version one of the formats would refuse or misread.
func checkVersion(v string) error {
	if !versionChars.MatchString(v) {
		return fmt.Errorf("version %q: it must start with a digit and hold only letters, digits, '.', '+' and '~'", v)
	}
	return nil
}

// commitTime is HEAD's commit time: the packages' file times, so that a rebuild of the same commit
// gives the same files.
func commitTime(root string) (time.Time, error) {
	cmd := exec.Command("git", "log", "-1", "--format=%ct")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the commit time (git log -1): %w", err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("commit time %q: %w", out, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}
