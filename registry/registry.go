// Package registry finds CLI bundles (every CLI.md at any depth, e.g. .cli/**/CLI.md), loads them
// through the manifest package and indexes them by their stable identity id@major.
package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/clihost/clihost/internal/beneath"
	"github.com/clihost/clihost/internal/parallel"
	"github.com/clihost/clihost/manifest"
)

// ManifestName is the file name of a bundle manifest.
const ManifestName = "CLI.md"

// skipDirs are never searched for bundles.
var skipDirs = map[string]bool{".git": true, "node_modules": true}

// Source is a place bundles come from.
type Source struct {
	Name     string // shown in listings, e.g. "embedded" or the directory given
	FS       fs.FS
	Root     string // where to search inside FS ("." for all)
	Display  func(string) string
	OSPath   func(string) string // the path on disk, for sources that are directories
	Embedded bool                // the built-in catalog: a bundle from another source with the same id@major shadows it
}

// DirSource is a source for a directory on disk. dir may be a bundle folder, a tree holding
// bundles at any depth, or a CLI.md file. Its files are read through a beneath.FS: a read never
// leaves the folder, whatever symlinks appear in it after the bundle-file-outside check (and Load
// confines each bundle's reads to its own folder). A relative dir is shown as given, but the bundles'
// folders on disk (Source.OSPath, manifest.Bundle.OSDir) are absolute: vendored binaries are
// run, and bundle folders protected, by absolute path.
func DirSource(dir string) (Source, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return Source{}, fmt.Errorf("bundle source %s: %w", dir, unwrap(err))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Source{}, fmt.Errorf("bundle source %s: %w", dir, err)
	}
	root, only := dir, ""
	if !st.IsDir() {
		root, only = filepath.Dir(dir), filepath.Base(dir)
		abs = filepath.Dir(abs)
	}
	under := func(base string) func(string) string {
		return func(p string) string {
			if p == "." {
				return filepath.Clean(base)
			}
			return filepath.Join(base, filepath.FromSlash(p))
		}
	}
	fsys, err := beneath.Open(abs)
	if err != nil {
		return Source{}, fmt.Errorf("bundle source %s: %w", dir, unwrap(err))
	}
	src := Source{Name: dir, FS: fsys, Root: ".", Display: under(root), OSPath: under(abs)}
	if only != "" {
		src.Root = only
	}
	return src, nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Discover lists the bundle manifests in src: Root itself when it is a file, Root/CLI.md when Root
// is a bundle folder, else every CLI.md beneath Root at any depth (not inside .git or node_modules).
func Discover(src Source) ([]string, error) {
	st, err := fs.Stat(src.FS, src.Root)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", src.Name, unwrap(err))
	}
	if !st.IsDir() {
		return []string{src.Root}, nil
	}
	if _, err := fs.Stat(src.FS, path.Join(src.Root, ManifestName)); err == nil {
		return []string{path.Join(src.Root, ManifestName)}, nil
	}
	var found []string
	err = fs.WalkDir(src.FS, src.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == src.Root {
				return err
			}
			return nil // unreadable subtrees are skipped
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return fs.SkipDir
		}
		if !d.IsDir() && d.Name() == ManifestName {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", src.Name, err)
	}
	sort.Strings(found)
	return found, nil
}

// Entry is a loaded bundle and where it came from.
type Entry struct {
	Bundle   *manifest.Bundle
	Source   string
	Shadowed *Entry // the embedded bundle this one replaces, if any
	Indexed  bool   // false for a bundle without an id and for the second of a duplicate pair
}

// Registry holds loaded bundles by id@major.
type Registry struct {
	entries []*Entry
	byKey   map[string]*Entry
	dirs    []string // the folders on disk the bundles were loaded from (see Dirs)
	// Findings are registry-level problems, such as a duplicate id@major.
	Findings manifest.Findings
}

// Load discovers and loads the bundles of every source, in order. A second bundle with the same
// id@major is an error naming both files, except that a bundle from a directory replaces an
// embedded one (so operators can override the built-in catalog).
func Load(sources ...Source) (*Registry, error) {
	type job struct {
		src    Source
		path   string
		bundle *manifest.Bundle
	}
	var jobs []*job
	for _, src := range sources {
		paths, err := Discover(src)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			jobs = append(jobs, &job{src: src, path: p})
		}
	}
	// Bundles are independent: load them on a few workers, then index them in discovery order so
	// that which of two duplicates wins does not depend on scheduling.
	parallel.Each(jobs, func(j *job) { j.bundle = loadBundle(j.src, j.path) })
	r := &Registry{byKey: map[string]*Entry{}}
	for _, src := range sources {
		if !src.Embedded && src.OSPath != nil {
			r.dirs = append(r.dirs, src.OSPath(src.Root))
		}
	}
	for _, j := range jobs {
		r.add(&Entry{Bundle: j.bundle, Source: j.src.Name}, j.src.Embedded)
	}
	return r, nil
}

// loadBundle loads the bundle whose CLI.md is at cliPath in src, reading through the sub-FS of its
// folder: for a directory source (a beneath.FS) that is a descriptor of the bundle folder itself,
// so no read of the bundle's files leaves it, symlinks swapped in after the lint checks included.
func loadBundle(src Source, cliPath string) *manifest.Bundle {
	dir := path.Dir(cliPath)
	opts := manifest.LoadOptions{Display: src.Display, OSPath: src.OSPath}
	fsys, err := fs.Sub(src.FS, dir)
	if err != nil || dir == "." {
		// dir "." is the source itself; an error (the folder swapped for a symlink out of it since
		// Discover) is reported by the loader's own checks and reads, which the source confines.
		return manifest.LoadBundle(src.FS, cliPath, opts)
	}
	in := func(f func(string) string) func(string) string {
		if f == nil {
			return nil
		}
		return func(p string) string { return f(path.Join(dir, p)) }
	}
	opts.Display, opts.OSPath = in(src.Display), in(src.OSPath)
	return manifest.LoadBundle(fsys, path.Base(cliPath), opts)
}

func (r *Registry) add(e *Entry, embedded bool) {
	b := e.Bundle
	if b.ID() == "" {
		r.entries = append(r.entries, e) // unusable, but its findings matter to lint
		return
	}
	key := b.Key()
	prev, dup := r.byKey[key]
	switch {
	case !dup:
	case embedded && !isEmbedded(prev):
		prev.Shadowed = e // the directory bundle already loaded replaces this embedded one
		return
	case !embedded && prev.Bundle != nil && isEmbedded(prev):
		e.Shadowed = prev
		r.remove(prev)
	default:
		r.Findings = append(r.Findings, manifest.Finding{
			Pos: b.IDPos, Severity: manifest.SeverityError, Rule: "registry-duplicate-id",
			Message: fmt.Sprintf("bundle %s is defined twice: here and in %s", key, prev.Bundle.File),
			Hint:    "ids are unique per major version; rename one bundle or bump its manifest major version",
		})
		r.entries = append(r.entries, e)
		return
	}
	e.Indexed = true
	r.byKey[key] = e
	r.entries = append(r.entries, e)
}

func isEmbedded(e *Entry) bool { return e.Source == "embedded" }

func (r *Registry) remove(e *Entry) {
	for i, x := range r.entries {
		if x == e {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			return
		}
	}
}

// Entries returns every loaded bundle in load order, including ones with errors and duplicates.
func (r *Registry) Entries() []*Entry { return r.entries }

// Dirs are the paths on disk the directory sources were loaded from (a folder searched for
// bundles, or a single CLI.md), absolute. A daemon reloads from them, so calls must not write
// there: a new bundle chooses its own sandbox.
func (r *Registry) Dirs() []string { return r.dirs }

// Bundles returns the indexed bundles (one per id@major) sorted by key.
func (r *Registry) Bundles() []*manifest.Bundle {
	keys := make([]string, 0, len(r.byKey))
	for k := range r.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*manifest.Bundle, 0, len(keys))
	for _, k := range keys {
		out = append(out, r.byKey[k].Bundle)
	}
	return out
}

// AllFindings returns all findings: each bundle's and the registry's, sorted.
func (r *Registry) AllFindings() manifest.Findings {
	var out manifest.Findings
	for _, e := range r.entries {
		out = append(out, e.Bundle.Findings...)
	}
	out = append(out, r.Findings...)
	out.Sort()
	return out
}

// Get finds a bundle by id@major, or by id alone (the highest major wins).
func (r *Registry) Get(name string) (*manifest.Bundle, error) {
	if e, ok := r.byKey[name]; ok {
		return e.Bundle, nil
	}
	var best *manifest.Bundle
	for _, e := range r.byKey {
		if e.Bundle.ID() == name && (best == nil || e.Bundle.Major() > best.Major()) {
			best = e.Bundle
		}
	}
	if best == nil {
		var known []string
		for k := range r.byKey {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("no bundle %q; loaded: %s", name, strings.Join(known, ", "))
	}
	return best, nil
}
