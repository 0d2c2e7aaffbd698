// Package entry makes a program the sandbox's init from its package initialisation: a program
// that imports it for its side effect (import _ ".../sandbox/nsinit/entry") becomes the init
// when nsinit starts it as one (nsinit.Main), before the rest of the program is initialised.
//
// Go initialises packages in import-path order, each once everything it imports is initialised
// (the language specification, "Package initialization"): this package needs only nsinit, whose
// imports are small, so it runs before large packages whose initialisation costs milliseconds
// (a JSON Schema library compiling its meta-schemas, an HTTP stack). A host that re-executes its
// own binary for every sandbox (no clihost-sandbox helper beside it, as under `go run`) then
// starts each sandbox almost as fast as the helper does. tests/inittrace_test.go checks the
// order in the built clihostd and clihostctl.
package entry

import "github.com/clihost/clihost/sandbox/nsinit"

func init() { nsinit.Main() }
