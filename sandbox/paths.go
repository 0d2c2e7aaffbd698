package sandbox

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/clihost/clihost/manifest"
)

// resolve returns the absolute path p, cleaned, with every symlink in its longest existing prefix
// resolved (see view.resolve).
func resolve(p string) (string, error) { return newView().resolve(p) }

// within reports whether path p is root or lies beneath it. (Without building root+"/": it runs
// for every pair of a compile's path lists.)
func within(p, root string) bool {
	return root == "/" || strings.HasPrefix(p, root) && (len(p) == len(root) || p[len(root)] == '/')
}

// anchor makes a pattern absolute: ~ is the calling user's home, an absolute pattern stays, and
// anything else is relative to the workspace. inside is the root a workspace pattern's resolved
// location must stay within ("" for ~ and absolute patterns).
func (c *compiler) anchor(p string) (abs, inside string, err error) {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		return filepath.Join(c.home, p[1:]), "", nil
	case strings.HasPrefix(p, "/"):
		return filepath.Clean(p), "", nil
	case c.ws == "":
		return "", "", errors.New("the pattern is relative to the workspace, and the call has none")
	}
	return filepath.Join(c.ws, p), c.ws, nil
}

// pin resolves abs and checks that the result stays inside root (when root is set).
func (c *compiler) pin(abs, inside string) (string, error) {
	r, err := c.fs.resolve(abs)
	if err != nil {
		return "", err
	}
	if inside != "" && !within(r, inside) {
		return "", fmt.Errorf("%s resolves to %s, outside the workspace %s", abs, r, inside)
	}
	return r, nil
}

// allowList turns fs.read or fs.write patterns into grants.
func (c *compiler) allowList(patterns []string, field string, a Access) error {
	for i, p := range patterns {
		if err := c.allow(p, a); err != nil {
			return fmt.Errorf("fs.%s[%d] %q: %w", field, i, p, err)
		}
	}
	return nil
}

// allow grants one pattern. Only literal, subtree and last-component wildcard patterns can be
// granted (the linter has checked this; it is checked again here, failing closed).
func (c *compiler) allow(p string, a Access) error {
	kind, err := manifest.ClassifyPattern(p)
	if err != nil {
		return err
	}
	switch kind {
	case manifest.PatternLiteral, manifest.PatternSubtree:
		static := p
		if kind == manifest.PatternSubtree {
			static = strings.TrimSuffix(strings.TrimSuffix(p, "/"), "**")
		}
		abs, inside, err := c.anchor(static)
		if err != nil {
			return err
		}
		r, err := c.pin(abs, inside)
		if err != nil {
			return err
		}
		c.declared = append(c.declared, r)
		c.add(PathRule{Path: r, Subtree: kind == manifest.PatternSubtree}, a)
		return nil
	case manifest.PatternLastWild:
		return c.allowLastWild(p, a)
	}
	return fmt.Errorf("a %s pattern cannot be granted: its static prefix would grant too much and expanding it too little", kind)
}

// allowLastWild expands a last-component wildcard now, into one literal grant per match.
func (c *compiler) allowLastWild(p string, a Access) error {
	dirPattern, last := path.Split(strings.TrimSuffix(p, "/"))
	abs, inside, err := c.anchor(dirPattern)
	if err != nil {
		return err
	}
	dir, err := c.pin(abs, inside)
	if err != nil {
		return err
	}
	c.declared = append(c.declared, dir)
	names, _, err := c.matches(dir, last)
	if err != nil {
		return fmt.Errorf("expand: %w", err)
	}
	for _, name := range names {
		r, err := c.pin(filepath.Join(dir, name), inside)
		if err != nil {
			return err
		}
		c.add(PathRule{Path: r}, a)
	}
	if len(names) == 0 {
		c.note("fs pattern %q matched nothing in %s: no rule", p, dir)
	}
	return nil
}

// add records a grant; a writable one is also a writable root.
func (c *compiler) add(r PathRule, a Access) {
	c.grant(r, a)
	if a&Write != 0 {
		c.writable[r.Path] = true
	}
}
