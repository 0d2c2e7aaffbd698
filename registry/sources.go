package registry

import (
	"os"
	"path/filepath"

	"github.com/clihost/clihost/bundles"
)

// EnvBundles names the environment variable holding bundle directories (a PATH-style list).
const EnvBundles = "CLIHOST_BUNDLES"

// LocalDir is the bundle folder looked for in the working directory.
const LocalDir = ".cli"

// EmbeddedSource is the built-in catalog.
func EmbeddedSource() Source {
	return Source{Name: "embedded", FS: bundles.FS(), Root: ".", Embedded: true,
		Display: func(p string) string { return "embedded:" + p }}
}

// DefaultSources resolves where bundles come from: the given directories (from --bundles) if any,
// else the directories in $CLIHOST_BUNDLES, else ./.cli (when it exists) plus the embedded catalog.
func DefaultSources(dirs []string) ([]Source, error) {
	if len(dirs) == 0 {
		for _, d := range filepath.SplitList(os.Getenv(EnvBundles)) {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	if len(dirs) > 0 {
		return dirSources(dirs)
	}
	var out []Source
	if st, err := os.Stat(LocalDir); err == nil && st.IsDir() {
		src, err := DirSource(LocalDir)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return append(out, EmbeddedSource()), nil
}

func dirSources(dirs []string) ([]Source, error) {
	out := make([]Source, 0, len(dirs))
	for _, d := range dirs {
		src, err := DirSource(d)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}
