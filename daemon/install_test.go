package daemon

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/store"
)

// vendored is a bundle "vend" whose binary is a script shipped in the bundle folder (install
// method vendored) that answers --version with "vend (GNU coreutils) VERSION".
func vendored(version string) map[string]string {
	cli := strings.Replace(fixture.CLI("vend", "vend", "  run: ./tools/run/TOOL.md\n"),
		"install: [{ method: apt, package: coreutils }]", "install: [{ method: vendored, path: ./bin/vend }]", 1)
	return map[string]string{
		"vend/CLI.md":            cli,
		"vend/tools/run/TOOL.md": strings.ReplaceAll(fixture.True()["true/tools/run/TOOL.md"], "true.run", "vend.run"),
		"vend/bin/vend":          "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'vend (GNU coreutils) " + version + "'; exit 0; fi\n",
	}
}

// runInstall runs e.Install and returns its last event and the messages of the progress events.
func runInstall(t *testing.T, e *Engine, req control.InstallRequest) (control.InstallEvent, []string) {
	t.Helper()
	var seen []string
	var mu sync.Mutex // the running reports come from another goroutine
	last := e.Install(context.Background(), req, func(ev control.InstallEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Phase != "progress" && ev.Phase != "running" {
			seen = append(seen, ev.Phase+": "+ev.Message)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return last, seen
}

func attempts(seen []string) int {
	n := 0
	for _, s := range seen {
		if strings.HasPrefix(s, "installing: ") {
			n++
		}
	}
	return n
}

// TestInstallReinstallsOnce: an install whose binary then fails its version check is installed
// once more, and only once, and ends with the version check's error; the attempt is recorded.
func TestInstallReinstallsOnce(t *testing.T) {
	e := testEngine(t, vendored("1.0"), nil) // the bundle wants >=8
	last, seen := runInstall(t, e, control.InstallRequest{Bundle: "vend"})
	if n := attempts(seen); n != 2 {
		t.Errorf("%d install attempts, want 2: %q", n, seen)
	}
	if last.Phase != "error" || last.Error == nil || last.Error.Code != "version_mismatch" {
		t.Fatalf("last event %+v (error %+v), want version_mismatch", last, last.Error)
	}
	var rec installRecord
	if _, ok, err := e.store.Get(store.BucketInstall, "vend@1", &rec); err != nil || !ok || rec.Method != "vendored" || rec.Version != "" {
		t.Errorf("install record %+v ok=%v err=%v: want the vendored install, with no verified version", rec, ok, err)
	}
	st, _ := e.Status(context.Background(), "vend")
	if len(st) != 1 || st[0].Install != "version_mismatch" || st[0].Ready {
		t.Errorf("status after the failed install: %+v", st)
	}
}

// TestInstallVerifiedOnce: a binary that passes its version check (a vendored one is found in its
// bundle folder) is not installed again unless forced; a forced install installs once and records
// the path and version the check found.
func TestInstallVerifiedOnce(t *testing.T) {
	e := testEngine(t, vendored("9.1"), nil)
	first, seen := runInstall(t, e, control.InstallRequest{Bundle: "vend"})
	if attempts(seen) != 0 || first.Phase != "done" || !strings.Contains(first.Message, "already installed") || first.Version != "9.1.0" {
		t.Errorf("install of a verified binary: %+v (%q)", first, seen)
	}
	last, seen := runInstall(t, e, control.InstallRequest{Bundle: "vend", Force: true})
	if n := attempts(seen); n != 1 || last.Phase != "done" || last.Version != "9.1.0" || last.Method != "vendored" || last.BinPath == "" {
		t.Fatalf("forced install: %d attempts, last %+v (%q)", n, last, seen)
	}
	var rec installRecord
	if _, ok, err := e.store.Get(store.BucketInstall, "vend@1", &rec); err != nil || !ok || rec.Version != "9.1.0" || rec.BinPath != last.BinPath {
		t.Errorf("install record %+v ok=%v err=%v", rec, ok, err)
	}
	if nf, _ := runInstall(t, e, control.InstallRequest{Bundle: "nothing-here"}); nf.Error == nil || nf.Error.Code != "not_found" {
		t.Errorf("install of an unknown bundle: %+v", nf)
	}
}
