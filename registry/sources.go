package registry

import (
	"errors"
	"fmt"
	"io/fs"
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

// DefaultSources resolves where clihostctl's in-process commands take bundles from: the given
// directories (clihostctl --bundles) if any, else the directories in $CLIHOST_BUNDLES, else ./.cli
// (when it exists) plus the embedded catalog. The daemon's are DaemonSources.
func DefaultSources(dirs []string) ([]Source, error) {
	if len(dirs) == 0 {
		dirs = envDirs()
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

// DaemonSources resolves where a daemon's bundles come from: the given directories (clihostd
// --bundles) if any, else those in $CLIHOST_BUNDLES, else ./.cli when it exists; then the built-in
// catalog unless catalog is false (clihostd --no-catalog). The directories add to the catalog (a
// directory bundle with the catalog's id@major replaces the catalog's). A named directory that
// does not exist is left out and named in the warnings, so that a daemon still serves the rest.
func DaemonSources(dirs []string, catalog bool) (srcs []Source, warnings []string, err error) {
	if len(dirs) == 0 {
		dirs = envDirs()
		if len(dirs) == 0 {
			if st, err := os.Stat(LocalDir); err == nil && st.IsDir() {
				dirs = []string{LocalDir}
			}
		}
	}
	for _, d := range dirs {
		src, err := DirSource(d)
		if errors.Is(err, fs.ErrNotExist) {
			warnings = append(warnings, fmt.Sprintf("bundle folder %s does not exist: no bundles loaded from it", d))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		srcs = append(srcs, src)
	}
	if catalog {
		srcs = append(srcs, EmbeddedSource())
	}
	return srcs, warnings, nil
}

// envDirs are the directories in $CLIHOST_BUNDLES.
func envDirs() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv(EnvBundles)) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// EmptySources names the directory sources from which reg holds no bundle at all: warnings for
// folders that hold something but no bundle (a CLI.md one level too deep, a typo), and empty, the
// folders with nothing in them at all (as the docs create /etc/clihost/bundles: a note, not a
// problem, while other sources serve bundles).
func EmptySources(reg *Registry, srcs []Source) (warnings, empty []string) {
	seen := map[string]bool{}
	for _, e := range reg.Entries() {
		seen[e.Source] = true
	}
	for _, s := range srcs {
		if s.Embedded || seen[s.Name] {
			continue
		}
		if ents, err := os.ReadDir(s.Name); err == nil && len(ents) == 0 {
			empty = append(empty, s.Name)
			continue
		}
		warnings = append(warnings, fmt.Sprintf("bundle folder %s holds no bundles (no CLI.md found)", s.Name))
	}
	return warnings, empty
}

// SourceNames are the sources as a list of names: folders, and "the built-in catalog".
func SourceNames(srcs []Source) []string {
	out := make([]string, 0, len(srcs))
	for _, s := range srcs {
		if s.Embedded {
			out = append(out, "the built-in catalog")
			continue
		}
		out = append(out, s.Name)
	}
	return out
}
