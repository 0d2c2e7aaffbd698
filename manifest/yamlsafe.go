package manifest

import (
	"fmt"
	"io"
	"io/fs"

	"go.yaml.in/yaml/v3"
)

// aliasFinding reports the first anchor (&name) or alias (*name) in the parsed frontmatter n, with
// how many more there are; nil when there are none. A manifest never needs them, and an alias is a
// reference that every later step (conversion, decoding into structs, encoding for an agent)
// expands: nested aliases of aliases make a kilobyte of YAML stand for gigabytes (a "billion
// laughs"). The walk follows Content only, never Alias, so it costs one step per node written in
// the file.
func (d *Document) aliasFinding(n *yaml.Node) Findings {
	var first *yaml.Node
	count := 0
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			if count++; first == nil {
				first = n
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	if first == nil {
		return nil
	}
	what := "anchor &" + first.Anchor
	if first.Kind == yaml.AliasNode {
		what = "alias *" + first.Value
	}
	more := ""
	if count > 1 {
		more = fmt.Sprintf(" (and %d more anchors or aliases)", count-1)
	}
	return Findings{{Pos: d.nodePos(first), Severity: SeverityError, Rule: "yaml-alias",
		Message: fmt.Sprintf("YAML %s%s: manifests may not share values through anchors and aliases", what, more),
		Hint:    "write the value out in full where it is used (a `<<: *name` merge key is an alias too)"}}
}

// readManifest reads a CLI.md or TOOL.md, at most MaxFileSize+1 bytes of it: a larger file (or a
// file that keeps growing) is never read whole, and ParseDocument refuses it. Only a regular file
// is opened: opening a FIFO would wait for a writer forever, and a device may never end.
func readManifest(fsys fs.FS, name string) ([]byte, error) {
	st, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file (%s)", st.Mode().Type())}
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readAllSized(io.LimitReader(f, MaxFileSize+1), min(max(st.Size(), 0), MaxFileSize))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// readAllSized reads r to its end into a buffer sized for the size stat gave plus one byte (to see
// a file that grew), as os.ReadFile does, rather than io.ReadAll's small start and doublings.
func readAllSized(r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, 0, size+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
