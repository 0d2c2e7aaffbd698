package manifest

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Rule bundle-file-outside: every file a bundle is made of or refers to (its CLI.md, the TOOL.md of each command,
// vendored binaries, local go packages, runner.cli, auth.ref, actions refs) must resolve inside the
// bundle folder on disk, symlinks followed. A symlink inside the bundle pointing inside is fine; one
// leading out would make the bundle run, or read, a file its author did not ship (a vendored binary
// linked to /bin/bash). The embedded catalog has no folder on disk and no symlinks.

// ruleOutside is the rule's id.
const ruleOutside = "bundle-file-outside"

// maxLinks bounds the symlinks followed while resolving one path, as the kernel's ELOOP does.
const maxLinks = 40

// outside checks the file rel (a slash path relative to the bundle folder, as written) and reports
// a finding at ptr of c when it does not resolve inside the bundle folder. It returns false when it
// reported. what names the reference in the message ("vendored binary").
func (l *linter) outside(c *collector, ptr, what, rel string) bool {
	if l.root == "" {
		return true // not on disk: nothing can be a symlink
	}
	target, err := resolveBeneath(l.root, rel)
	if err != nil {
		c.at(ptr, SeverityError, ruleOutside, fmt.Sprintf("%s %q cannot be resolved: %v", what, rel, err), "a symlink in a bundle may only point at another file of the bundle")
		return false
	}
	if !insideDir(l.root, target) {
		c.at(ptr, SeverityError, ruleOutside, fmt.Sprintf("%s %q resolves to %s, outside the bundle folder %s", what, rel, target, l.root),
			"copy the file into the bundle folder; a symlink in a bundle may only point at another file of the bundle")
		return false
	}
	return true
}

// manifestInside resolves the bundle folder dir on disk ("" when not on disk) and checks that the
// manifest, name inside it, resolves inside it, before anything reads it. It returns the folder
// with its symlinks resolved, or the finding that refuses the bundle (without a file name).
func manifestInside(dir, name string) (string, *Finding) {
	if dir == "" {
		return "", nil
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", &Finding{Severity: SeverityError, Rule: "file-unreadable", Message: "the bundle folder cannot be resolved: " + unwrapPathError(err).Error(), Hint: "check the folder and its permissions"}
	}
	target, err := resolveBeneath(root, name)
	if err == nil && insideDir(root, target) {
		return root, nil
	}
	msg := fmt.Sprintf("%s resolves to %s, outside the bundle folder %s", name, target, root)
	if err != nil {
		msg = fmt.Sprintf("%s cannot be resolved: %v", name, err)
	}
	return "", &Finding{Severity: SeverityError, Rule: ruleOutside, Message: msg, Hint: "copy the manifest into the bundle folder; a symlink in a bundle may only point at another file of the bundle"}
}

// cliFileRules checks the files CLI.md refers to (vendored binaries: vendoredRule).
func (l *linter) cliFileRules() {
	for i, m := range l.cli.Install {
		if m.Method == MethodGo && strings.HasPrefix(m.Package, "./") { // vendored paths: vendoredRule
			l.outside(l.c, JoinPointer("/install", i, "package"), "go package", m.Package)
		}
	}
	if a := l.cli.Auth; a != nil && a.Ref != "" && !strings.Contains(a.Ref, "://") {
		l.outside(l.c, "/auth/ref", "auth.ref", a.Ref)
	}
}

// resolveBeneath follows rel from root the way the kernel resolves a path, one component at a time
// (symlinks replaced by their targets, .. taken from the resolved folder), and returns the absolute
// path it leads to. root is absolute with its symlinks resolved. Where a component does not exist
// the rest is joined lexically: the file's absence is another rule's business.
func resolveBeneath(root, rel string) (string, error) {
	cur := root
	if path.IsAbs(rel) {
		cur = "/"
	}
	rest := strings.Split(rel, "/")
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		st, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("more than %d symbolic links at %s", maxLinks, next)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(filepath.ToSlash(target), "/"), rest...)
	}
	return cur, nil
}

// insideDir reports whether the clean absolute path p is dir or beneath it.
func insideDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
