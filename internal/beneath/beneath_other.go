//go:build !linux

package beneath

import (
	"io/fs"
	"os"
	"path/filepath"
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
