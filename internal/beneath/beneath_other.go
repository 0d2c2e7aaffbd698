//go:build !linux

package beneath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FS is, where there is no openat2, os.DirFS: its opens follow symbolic links wherever they lead.
type FS struct {
	fs.StatFS
	root string
}

// Open returns the FS beneath dir.
func Open(dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &FS{StatFS: os.DirFS(abs).(fs.StatFS), root: abs}, nil
}

// Root is the directory's path, as opened.
func (f *FS) Root() string { return f.root }

// Executable resolves rel beneath dir with filepath.EvalSymlinks (a check before the use, not at
// it) and returns the resolved path when it stays beneath dir and is an executable regular file.
func Executable(dir, rel string) (string, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	p, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return "", err
	}
	if r, err := filepath.Rel(root, p); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", &fs.PathError{Op: "open", Path: rel, Err: ErrOutside}
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return "", &fs.PathError{Op: "open", Path: rel, Err: errors.New("not an executable regular file")}
	}
	return p, nil
}
