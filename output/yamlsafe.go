package output

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// maxYAMLDepth bounds the nesting of YAML output, aliases followed.
const maxYAMLDepth = 512

// errYAMLTooLarge refuses YAML output whose aliases expand it past its budget.
var errYAMLTooLarge = errors.New("the YAML output expands through aliases (&anchor, *alias) to far more than its own size; refused")

// decodeYAML decodes YAML output as the YAML library does into an any, after checking on the
// parsed node tree (which holds each aliased node once) that the value, aliases expanded, is no
// larger than a small multiple of the output itself and no deeper than maxYAMLDepth. The agent
// receives the expanded value as JSON, so a few nested aliases of a long string (under the
// library's own ratio check) would otherwise stand for gigabytes.
func decodeYAML(data []byte) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("unparseable YAML (%v)", r)
		}
	}()
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	if root.Kind == 0 {
		return nil, nil
	}
	w := expansion{budget: 4*len(data) + 1<<20, seen: map[*yaml.Node]int{}}
	if w.size(&root, 0) > w.budget {
		return nil, w.err
	}
	if err := root.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// expansion measures a node tree with its aliases expanded: a node and its scalar bytes, each
// anchored node measured once.
type expansion struct {
	budget int
	seen   map[*yaml.Node]int
	err    error
}

// size returns the expanded size of n, or more than the budget (with w.err set) as soon as it
// is exceeded.
func (w *expansion) size(n *yaml.Node, depth int) int {
	over := w.budget + 1
	if depth > maxYAMLDepth {
		w.err = fmt.Errorf("the YAML output is nested deeper than %d levels; refused", maxYAMLDepth)
		return over
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		s, ok := w.seen[n.Alias]
		if !ok {
			w.seen[n.Alias] = over // an alias inside its own anchor's value
			s = w.size(n.Alias, depth+1)
			w.seen[n.Alias] = s
		}
		if s > w.budget && w.err == nil {
			w.err = errYAMLTooLarge
		}
		return s
	}
	total := 1 + len(n.Value)
	for _, c := range n.Content {
		if total += w.size(c, depth+1); total > w.budget {
			if w.err == nil {
				w.err = errYAMLTooLarge
			}
			return over
		}
	}
	return total
}
