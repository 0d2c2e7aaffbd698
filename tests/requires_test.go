package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/internal/fixture"
)

// requiresBundle is a bundle id (running true) whose only install entry is a download into the
// state directory, with the given requires block.
func requiresBundle(id, requires string) map[string]string {
	cli := fixture.CLI("true", id, "  run: ./tools/run/TOOL.md\n")
	cli = strings.Replace(cli, "install: [{ method: apt, package: coreutils }]",
		`install: [{ method: download, url: "http://127.0.0.1:9/true", extract_bin: "true", verify_sha256: "`+strings.Repeat("0", 64)+`" }]`+"\nrequires: "+requires, 1)
	tool := strings.ReplaceAll(fixture.True()["true/tools/run/TOOL.md"], "true.run", id+".run")
	return map[string]string{id + "/CLI.md": cli, id + "/tools/run/TOOL.md": tool}
}

// TestRequiresDoctorAndInstall runs a root daemon whose state directory is on a 16 MiB tmpfs:
// doctor prints a requires line per bundle that declares requirements (met for 4 MB, short for
// 64 MB, naming both amounts), and an install of the bundle asking for 64 MB is refused by the
// daemon with insufficient_resources before anything is downloaded.
func TestRequiresDoctorAndInstall(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=16m,mode=0755"); err != nil {
		fixture.Missing(t, "mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(base, unix.MNT_DETACH) })
	state := filepath.Join(base, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	files := requiresBundle("small", "{ min_disk_mb: 4, min_memory_mb: 1 }")
	for k, v := range requiresBundle("big", "{ min_disk_mb: 64 }") {
		files[k] = v
	}
	bundles := fixture.Write(t, files)
	if r := runBin(t, bin.ctl, "", "lint", bundles); r.code != 0 {
		t.Fatalf("lint: %s%s", r.stdout, r.stderr)
	}
	d := startDaemon(t, state, "--no-catalog", "--bundles", bundles)
	_, checks, text := doctor(t, d.socket)
	small, big := find(checks, "requires small@1"), find(checks, "requires big@1")
	if len(small) != 1 || small[0].Status != "ok" || !strings.Contains(small[0].Message, "min_disk_mb 4: ") ||
		!strings.Contains(small[0].Message, "MB free on the filesystem of "+filepath.Join(state, "bin")) || !strings.Contains(small[0].Message, "min_memory_mb 1: ") {
		t.Errorf("small: %+v\n%s", small, text)
	}
	if len(big) != 1 || big[0].Status != "warn" || !strings.Contains(big[0].Message, "the bundle's requires.min_disk_mb is 64 MB") ||
		!strings.Contains(big[0].Fix, "free at least") {
		t.Errorf("big: %+v\n%s", big, text)
	}
	if !strings.Contains(text, "warn  requires big@1: ") {
		t.Errorf("doctor's text has no requires line for big:\n%s", text)
	}
	r := d.ctl(t, "install", "big", "--force", "--json")
	var res struct {
		Error struct{ Code, Message, Hint string }
	}
	_ = json.Unmarshal([]byte(r.stdout), &res)
	if r.code == 0 || res.Error.Code != "insufficient_resources" || !strings.Contains(res.Error.Message, "requires.min_disk_mb is 64 MB") ||
		!strings.Contains(res.Error.Message, " MB free on the filesystem of "+filepath.Join(state, "bin")) {
		t.Fatalf("install big: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
