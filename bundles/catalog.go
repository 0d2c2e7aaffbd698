// Package bundles is clihost's shipped catalog: one folder per CLI bundle (CLI.md plus
// tools/*/TOOL.md, and testdata/ where a bundle ships fixtures for its examples), embedded into the binaries as the default bundle source.
package bundles

import (
	"embed"
	"io/fs"
)

//go:embed */CLI.md */tools */testdata
var catalog embed.FS

// FS returns the catalog; each bundle is at <id>/CLI.md.
func FS() fs.FS { return catalog }
