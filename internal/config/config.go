// Package config reads clihostd's and clihostctl's configuration files. A file is YAML whose keys
// are the command's flag names (http: 127.0.0.1:8931, audit-keep: 5, bundles: [a, b] for a
// repeatable flag); a key that names a subcommand holds that command's own flags (serve-mcp:
// {listen: …}). A flag given on the command line overrides the file. An unknown key is an error
// naming the nearest known one, and a file that someone other than root or the reading user could
// change is refused (whoever may write it chooses the flags of the program that reads it).
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/clihost/clihost/internal/editdist"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// maxSize bounds a configuration file.
const maxSize = 1 << 20

// Key is one key of a file: a flag.
type Key struct {
	Name, Usage, Default string
	// List says the flag is repeatable: its key takes a sequence (a single value is one element).
	List bool
	// Changed says the flag was given on the command line: the file does not override it.
	Changed bool
	// Set gives the flag a value (once per element for a List); nil: the key is checked, not set
	// (a section of another command than the one running).
	Set func(string) error
	// Value is the flag's effective value as text (a List's elements joined with newlines).
	Value func() []string
	// FromFile says Apply set the flag from the file.
	FromFile bool
}

// Section is the keys of one command and the sections of its subcommands.
type Section struct {
	Keys     []Key
	Sections map[string]*Section
}

// lister is a repeatable flag.Value that reports its values (clihostd's repeatable flags).
type lister interface{ List() []string }

// FromFlagSet is the section of a standard flag set, without the flags named in skip (those that
// only make sense on a command line: --config, --check). Every flag is taken as not Changed: the
// caller marks those given on the command line (MarkChanged).
func FromFlagSet(fs *flag.FlagSet, skip ...string) *Section {
	s := &Section{}
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		k := Key{Name: f.Name, Usage: f.Usage, Default: f.DefValue, Set: f.Value.Set}
		if l, ok := f.Value.(lister); ok {
			k.List, k.Default = true, ""
			k.Value = l.List
		} else {
			k.Value = func() []string { return []string{f.Value.String()} }
		}
		s.Keys = append(s.Keys, k)
	})
	return s
}

// MarkChanged marks the keys of s that were set on fs's command line.
func (s *Section) MarkChanged(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		for i := range s.Keys {
			if s.Keys[i].Name == f.Name {
				s.Keys[i].Changed = true
			}
		}
	})
}

// FromPFlags is the section of a pflag set (cobra's), without the flags in skip; active says
// the keys are set (the running command's flags), else only checked.
func FromPFlags(fs *pflag.FlagSet, active bool, skip ...string) *Section {
	s := &Section{}
	fs.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(skip, f.Name) || f.Hidden {
			return
		}
		k := Key{Name: f.Name, Usage: f.Usage, Default: f.DefValue, Changed: f.Changed}
		if active {
			k.Set = func(v string) error { return fs.Set(f.Name, v) }
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			k.List, k.Default = true, ""
			k.Value = sv.GetSlice
		} else {
			k.Value = func() []string { return []string{f.Value.String()} }
		}
		s.Keys = append(s.Keys, k)
	})
	return s
}

// FromFile are the names of s's keys that Apply set from the file (not those of its sections),
// sorted: what a daemon logs, so that a setting is traced to the file.
func (s *Section) FromFile() []string {
	var out []string
	for _, k := range s.Keys {
		if k.FromFile {
			out = append(out, k.Name)
		}
	}
	sort.Strings(out)
	return out
}

// key finds a key of s by name.
func (s *Section) key(name string) *Key {
	for i := range s.Keys {
		if s.Keys[i].Name == name {
			return &s.Keys[i]
		}
	}
	return nil
}

// names are the keys and sections of s, sorted.
func (s *Section) names() []string {
	var out []string
	for _, k := range s.Keys {
		out = append(out, k.Name)
	}
	for n := range s.Sections {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Apply reads the YAML document data (of the file named file, for messages) into s: each key's
// value is Set unless the key was given on the command line. It checks every key's name and shape
// in every section first, so nothing is set from a file with a wrong key; a value its flag refuses
// is an error naming the key and the value.
func Apply(file string, data []byte, s *Section) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
		return nil // empty, or comments only
	}
	var sets []func() error
	if err := walk(file, doc.Content[0], s, &sets); err != nil {
		return err
	}
	for _, set := range sets {
		if err := set(); err != nil {
			return err
		}
	}
	return nil
}

// walk checks the mapping n against s and collects the sets to make.
func walk(file string, n *yaml.Node, s *Section, sets *[]func() error) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d:%d: want a mapping of keys (flag names) to values", file, n.Line, n.Column)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := kn.Value
		at := fmt.Sprintf("%s:%d:%d", file, kn.Line, kn.Column)
		if seen[name] {
			return fmt.Errorf("%s: key %q appears twice", at, name)
		}
		seen[name] = true
		if sub, ok := s.Sections[name]; ok {
			if err := walk(file, vn, sub, sets); err != nil {
				return err
			}
			continue
		}
		k := s.key(name)
		if k == nil {
			return unknown(at, name, s.names())
		}
		values, err := scalars(file, vn, k.List)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", at, name, err)
		}
		if k.Changed || k.Set == nil || !k.List && values[0] == k.Default {
			continue // the command line's, not the running command's, or the default (--print-config's "")
		}
		*sets = append(*sets, func() error {
			for _, v := range values {
				if err := k.Set(v); err != nil {
					return fmt.Errorf("%s: %s %q: %w", at, name, v, err)
				}
			}
			k.FromFile = true
			return nil
		})
	}
	return nil
}

// scalars are a key's values: one scalar, or (list) a sequence of scalars.
func scalars(file string, n *yaml.Node, list bool) ([]string, error) {
	switch {
	case n.Kind == yaml.ScalarNode:
		return []string{n.Value}, nil
	case n.Kind == yaml.SequenceNode && list:
		out := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("%s:%d:%d: want a plain value", file, e.Line, e.Column)
			}
			out = append(out, e.Value)
		}
		return out, nil
	case n.Kind == yaml.SequenceNode:
		return nil, errors.New("takes one value, not a list")
	default:
		return nil, errors.New("want a plain value")
	}
}

// unknown is the error of an unknown key, naming the nearest known one.
func unknown(at, name string, known []string) error {
	best, dist := "", len(name)/2+2
	for _, k := range known {
		if d := editdist.Distance(name, k); d < dist {
			best, dist = k, d
		}
	}
	if best != "" {
		return fmt.Errorf("%s: unknown key %q; did you mean %q?", at, name, best)
	}
	return fmt.Errorf("%s: unknown key %q; the keys are the flag names: %s", at, name, strings.Join(known, ", "))
}

// Print writes s's effective values as a configuration file (YAML), each key after its usage as
// a comment.
func Print(w io.Writer, s *Section) error {
	var buf bytes.Buffer
	for _, k := range s.Keys {
		fmt.Fprintf(&buf, "# %s\n", strings.ReplaceAll(k.Usage, "\n", " "))
		node := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: k.Name}, valueNode(k)}}
		out, err := yaml.Marshal(node)
		if err != nil {
			return fmt.Errorf("print %s: %w", k.Name, err)
		}
		buf.Write(out)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// valueNode is a key's effective value as YAML: a string scalar, or a sequence of them.
func valueNode(k Key) *yaml.Node {
	values := k.Value()
	if !k.List {
		return &yaml.Node{Kind: yaml.ScalarNode, Value: values[0], Style: quoteIfNeeded(values[0])}
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range values {
		seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: v, Style: quoteIfNeeded(v)})
	}
	return seq
}

// quoteIfNeeded quotes an empty value, so that it reads back as the empty string and not null.
func quoteIfNeeded(v string) yaml.Style {
	if v == "" {
		return yaml.DoubleQuotedStyle
	}
	return 0
}

// ReadFile reads the configuration file path, refusing one that is not a regular file, larger
// than 1 MiB, or that someone other than root or this process's user could change (the file, or a
// folder on its way, owned by another user or writable by group or others without the sticky bit).
// A missing file is (nil, nil) unless required; so is one behind a folder this user may not enter
// (clihostctl run as another user with HOME still root's), but not a file this user may not read.
func ReadFile(path string, required bool) ([]byte, error) {
	data, err := ReadTrusted(path, configFile)
	if !required && absent(path, err) {
		return nil, nil
	}
	return data, err
}

// Markdown is s's keys as a Markdown table (key, default, what it does), for the documentation;
// a section's keys follow under its name ("serve-mcp: listen").
func Markdown(s *Section) string {
	var b strings.Builder
	b.WriteString("| key | default | |\n|---|---|---|\n")
	markdownRows(&b, "", s)
	return b.String()
}

func markdownRows(b *strings.Builder, prefix string, s *Section) {
	for _, k := range s.Keys {
		def := "`" + k.Default + "`"
		switch {
		case k.List:
			def = "`[]`"
		case k.Default == "":
			def = "`\"\"`"
		}
		fmt.Fprintf(b, "| `%s%s` | %s | %s |\n", prefix, k.Name, def, strings.ReplaceAll(strings.ReplaceAll(k.Usage, "|", `\|`), "\n", " "))
	}
	names := make([]string, 0, len(s.Sections))
	for n := range s.Sections {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		markdownRows(b, prefix+n+": ", s.Sections[n])
	}
}

// absent says that opening path failed with err because there is no file there for this user:
// it does not exist, or a folder on its way may not be searched.
func absent(path string, err error) bool {
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if !errors.Is(err, os.ErrPermission) {
		return false
	}
	_, lerr := os.Lstat(path)
	return errors.Is(lerr, os.ErrPermission)
}
