package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

// resolveBundle finds a bundle by id, id@major, or the path of a bundle folder or CLI.md.
func resolveBundle(g *globalOptions, name string) (*manifest.Bundle, error) {
	if strings.ContainsRune(name, os.PathSeparator) || name == "." {
		if _, err := os.Stat(name); err == nil {
			src, err := registry.DirSource(name)
			if err != nil {
				return nil, err
			}
			reg, err := registry.Load(src)
			if err != nil {
				return nil, err
			}
			bs := reg.Entries()
			if len(bs) != 1 {
				return nil, fmt.Errorf("%s holds %d bundles; name one folder or CLI.md", name, len(bs))
			}
			return bs[0].Bundle, nil
		}
	}
	reg, err := g.registry()
	if err != nil {
		return nil, err
	}
	return reg.Get(name)
}
