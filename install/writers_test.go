package install

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/manifest"
)

// holdForWriting starts a process that holds path open for writing for d, as a process the daemon
// forked while it wrote the file holds a copy of the descriptor until its own exec (a sandbox's
// init, a git run for another call), and returns once it holds it.
func holdForWriting(t *testing.T, path string, d time.Duration) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// newBinary writes a program that exits 0 into a new temporary directory of in's, as a download
// leaves it, and returns its path.
func newBinary(t *testing.T, in *installer) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(in.o.StateDir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := in.tempDir()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "tool")
	if err := os.WriteFile(src, []byte("#!/bin/sh\nexit 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestPlacedBinaryRunsAlthoughAForkHeldItsDescriptor: a binary another process still holds open
// for writing cannot be executed (ETXTBSY, "text file busy"): the version check that follows
// an install failed when the daemon had forked while the download was written. place returns
// only once no process holds the binary open for writing.
func TestPlacedBinaryRunsAlthoughAForkHeldItsDescriptor(t *testing.T) {
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1/tool"})
	src := newBinary(t, in)
	holdForWriting(t, src, 400*time.Millisecond)
	if err := os.Chmod(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(src).Run(); !errors.Is(err, syscall.ETXTBSY) {
		t.Fatalf("a binary held open for writing ran: %v; want ETXTBSY (the attack did not happen)", err)
	}
	dst, err := in.place(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(dst).Run(); err != nil {
		t.Fatalf("the installed binary, run as the version check runs it: %v", err)
	}
}

// TestPlaceRefusesABinaryHeldForWritingForGood: a binary still held open for writing after
// writersWait is not placed, with an error that says why.
func TestPlaceRefusesABinaryHeldForWritingForGood(t *testing.T) {
	defer func(d time.Duration) { writersWait = d }(writersWait)
	writersWait = 200 * time.Millisecond
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1/tool"})
	src := newBinary(t, in)
	holdForWriting(t, src, time.Minute)
	_, err := in.place(src)
	if err == nil || !strings.Contains(err.Error(), "open for writing") {
		t.Fatalf("place of a binary another process writes: %v; want an error saying it is open for writing", err)
	}
	if _, serr := os.Stat(filepath.Join(BinDir(in.o.StateDir, in.key), in.binName())); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the binary was placed anyway (%v)", serr)
	}
}
