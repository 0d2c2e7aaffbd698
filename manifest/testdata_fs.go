package manifest

import (
	"io/fs"
	"os"
	"path"
)

// Files returns the bundle's folder as a file system, and a function that releases it: the folder on
// disk (confined to it: a symbolic link may not lead out of it) or the bundle's folder inside the
// catalog it was loaded from.
func (b *Bundle) Files() (fs.FS, func(), error) {
	if b.OSDir != "" {
		root, err := os.OpenRoot(b.OSDir)
		if err != nil {
			return nil, nil, err
		}
		return root.FS(), func() { root.Close() }, nil
	}
	sub, err := fs.Sub(b.fsys, path.Dir(b.fsPath))
	return sub, func() {}, err
}
