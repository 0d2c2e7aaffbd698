// Command clihost-sandbox is the small executable clihostd and clihostctl re-exec to build the
// kernel sandbox of a CLI call (package sandbox/nsinit: the init and its confinement steps). It does
// nothing else: started without the markers nsinit passes, it exits with status 2.
//
// Installing it next to clihostd and clihostctl is optional: without it they re-exec themselves,
// which works the same but starts slower (their package initialisation runs in every sandbox).
package main

import (
	"fmt"
	"os"

	"github.com/clihost/clihost/sandbox/nsinit"
)

func main() {
	nsinit.Main()
	fmt.Fprintln(os.Stderr, "clihost-sandbox: this program is started by clihostd and clihostctl to build a call's sandbox; it is not meant to be run by hand")
	os.Exit(2)
}
