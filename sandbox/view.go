package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// view is one compilation's look at the filesystem: it asks the kernel about each path once (lstat,
// readlink) and answers every later question about it from what it was told. Compile resolves the
// same few directories hundreds of times (every mandatory deny under ~ resolves ~ again, and a
// missing home is walked up to / for each one); a view makes that one system call each. A view
// lives for one Compile only and is never shared between calls, so a call sees the filesystem as
// it is when the call compiles its policy, exactly as without it.
type view struct {
	lstats map[string]lstatAnswer
	links  map[string]linkAnswer
	evals  map[string]linkAnswer // evalSymlinks's answers
	// asked, when not nil, records every question the view asks the kernel (see Cache).
	asked *journal
}

type lstatAnswer struct {
	fi  fs.FileInfo
	err error
}

type linkAnswer struct {
	target string
	err    error
}

// newView returns an empty view.
func newView() *view {
	return &view{lstats: map[string]lstatAnswer{}, links: map[string]linkAnswer{}, evals: map[string]linkAnswer{}}
}

// lstat is os.Lstat, asked once per path. A path whose parent the view found missing is missing
// too, without asking (a missing home holds thirty-odd mandatory denies).
func (v *view) lstat(p string) (fs.FileInfo, error) {
	if a, ok := v.lstats[p]; ok {
		return a.fi, a.err
	}
	if a, ok := v.lstats[filepath.Dir(p)]; ok && errors.Is(a.err, fs.ErrNotExist) {
		err := &fs.PathError{Op: "lstat", Path: p, Err: syscall.ENOENT}
		v.lstats[p] = lstatAnswer{nil, err}
		return nil, err
	}
	fi, err := os.Lstat(p)
	v.lstats[p] = lstatAnswer{fi, err}
	v.asked.lstat(p, fi, err)
	return fi, err
}

// readlink is os.Readlink, asked once per path.
func (v *view) readlink(p string) (string, error) {
	if a, ok := v.links[p]; ok {
		return a.target, a.err
	}
	t, err := os.Readlink(p)
	v.links[p] = linkAnswer{t, err}
	v.asked.readlink(p, t, err)
	return t, err
}

// stat is os.Stat: the file p leads to, its symbolic links followed.
func (v *view) stat(p string) (fs.FileInfo, error) {
	r, err := v.evalSymlinks(p)
	if err != nil {
		return nil, err
	}
	return v.lstat(r)
}

// errTooManyLinks is filepath.EvalSymlinks's error for a chain of more than 255 links.
var errTooManyLinks = errors.New("EvalSymlinks: too many links")

// evalSymlinks is filepath.EvalSymlinks (its Unix algorithm, step for step) for an absolute path,
// through the view, each path's answer remembered; a relative path is left to
// filepath.EvalSymlinks.
func (v *view) evalSymlinks(path string) (string, error) {
	if !filepath.IsAbs(path) {
		v.asked.markOpaque("a relative path resolved")
		return filepath.EvalSymlinks(path)
	}
	if a, ok := v.evals[path]; ok {
		return a.target, a.err
	}
	r, err := v.walkSymlinks(path)
	v.evals[path] = linkAnswer{r, err}
	return r, err
}

// walkSymlinks is evalSymlinks's walk.
func (v *view) walkSymlinks(path string) (string, error) {
	dest := "/"
	links := 0
	for start, end := 1, 1; start < len(path); start = end {
		for start < len(path) && path[start] == '/' {
			start++
		}
		end = start
		for end < len(path) && path[end] != '/' {
			end++
		}
		name := path[start:end]
		switch name {
		case "":
			continue
		case ".":
			continue
		case "..":
			// Back up to the previous component (dest is absolute: never above /).
			dest = dest[:max(strings.LastIndexByte(dest, '/'), 1)]
			continue
		}
		if !strings.HasSuffix(dest, "/") {
			dest += "/"
		}
		dest += name
		fi, err := v.lstat(dest)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if !fi.Mode().IsDir() && end < len(path) {
				return "", syscall.ENOTDIR
			}
			continue
		}
		if links++; links > 255 {
			return "", errTooManyLinks
		}
		link, err := v.readlink(dest)
		if err != nil {
			return "", err
		}
		path = link + path[end:]
		if strings.HasPrefix(link, "/") {
			dest, end = "/", 1
		} else {
			// A relative link replaces the last component of dest.
			dest, end = dest[:max(strings.LastIndexByte(dest, '/'), 1)], 0
		}
	}
	return filepath.Clean(dest), nil
}

// resolve returns the absolute path p, cleaned, with every symlink in its longest existing prefix
// resolved; the components that do not exist yet are appended as they are. A component that
// exists but does not resolve (a dangling symlink, a loop) is an error: a rule through it could be
// redirected later by creating its target.
func (v *view) resolve(p string) (string, error) {
	cur, rest := filepath.Clean(p), ""
	for {
		r, err := v.evalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("resolve %s: %w", p, err)
		}
		if _, lerr := v.lstat(cur); lerr == nil {
			return "", fmt.Errorf("resolve %s: %s is a dangling symlink", p, cur)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return filepath.Join(cur, rest), nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
