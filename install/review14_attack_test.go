package install

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"golang.org/x/sys/unix"
)

// Review 14 (commit 652b3b1; the defects it found are fixed: the write lease's open, and
// network file systems, whose EAGAIN says nothing of writers): place waits, at most writersWait, until a read lease can be taken
// on the binary (awaitNoWriters), so that a copy of the download's write descriptor in a process
// the daemon forked does not make the version check's exec fail with ETXTBSY. These attacks
// check whether the wait is really bounded, whether it works for a daemon that is not root, what
// it does without leases, and that it does not get in the way of the file's other users.

// TestReview14PlaceIsBoundedByWritersWaitAgainstAWriteLease: a process that may take a lease on
// the download (its owner: the daemon's own uid, e.g. a curl installer script or package manager
// of another bundle the daemon runs unsandboxed as that uid, or anything with CAP_LEASE) holds a
// WRITE lease on it. awaitNoWriters opens the file O_RDONLY without O_NONBLOCK, and that open
// breaks the lease and blocks until the holder gives it up or lease-break-time (45 s by default)
// passes, however small writersWait is: the install hangs 45 s per attempt instead of failing
// after writersWait (and the holder can renew the lease for every attempt). (DEFECT on 652b3b1.)
func TestReview14PlaceIsBoundedByWritersWaitAgainstAWriteLease(t *testing.T) {
	defer func(d time.Duration) { writersWait = d }(writersWait)
	writersWait = 200 * time.Millisecond
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1/tool"})
	src := newBinary(t, in)
	// The lease holder: another open file description of the download (the owner may take a
	// write lease while nobody else has the file open).
	holder, err := unix.Open(src, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(holder)
	if _, err := unix.FcntlInt(uintptr(holder), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		fixture.Missing(t, "no write lease here: %v", err)
	}
	// Bounded by writersWait, place gives up with the error that names a lease. An open that waited
	// for the lease instead would succeed once the kernel revoked it (lease-break-time) and place
	// would return nil; the guard below only keeps a regression from hanging the suite that long.
	done := make(chan error, 1)
	go func() { _, err := in.place(src); done <- err }()
	var err2 error
	select {
	case err2 = <-done:
	case <-time.After(time.Minute):
		_, _ = unix.FcntlInt(uintptr(holder), unix.F_SETLEASE, unix.F_UNLCK)
		err2 = <-done
	}
	if err2 == nil || !strings.Contains(err2.Error(), "leased") {
		t.Errorf("place of a download another process holds a write lease on: %v; want the error of writersWait (%v)", err2, writersWait)
	}
}

// TestReview14PlaceIgnoresReadersOfTheDownload: processes that hold the download open for
// reading only (the daemon's own sniff, a forked copy of a read descriptor) neither delay nor
// fail the install, and the binary then runs.
func TestReview14PlaceIgnoresReadersOfTheDownload(t *testing.T) {
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1/tool"})
	src := newBinary(t, in)
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "5")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Were readers waited for, place would give up after writersWait.
	defer func(d time.Duration) { writersWait = d }(writersWait)
	writersWait = 10 * time.Millisecond
	dst, err := in.place(src)
	if err != nil {
		t.Fatalf("place of a file only held for reading: %v", err)
	}
	if err := exec.Command(dst).Run(); err != nil {
		t.Fatalf("the installed binary: %v", err)
	}
}

// TestReview14PlaceDoesNotBlockAWriterOpeningMeanwhile: while place runs, a process opens the
// file for writing now and then (in life: nobody but the daemon's own forks can). An open for
// writing while place holds its read lease breaks the lease, and the daemon gets SIGIO (Go ignores
// it unless the program asked for it with signal.Notify). place must still succeed once the writer
// is gone, and leave no lease behind: an open for writing that may not wait (O_NONBLOCK) then
// succeeds at once.
func TestReview14PlaceDoesNotBlockAWriterOpeningMeanwhile(t *testing.T) {
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1/tool"})
	src := newBinary(t, in)
	sigio := make(chan os.Signal, 64)
	signal.Notify(sigio, syscall.SIGIO)
	defer signal.Stop(sigio)
	stop := make(chan struct{})
	opened := make(chan int, 1)
	go func() {
		n := 0
		defer func() { opened <- n }()
		for range 2000 {
			select {
			case <-stop:
				return
			default:
			}
			fd, err := unix.Open(src, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return // renamed away
			}
			unix.Close(fd)
			n++
			time.Sleep(500 * time.Microsecond)
		}
	}()
	dst, err := in.place(src)
	close(stop)
	t.Logf("place: %v; the writer's opens meanwhile: %d; SIGIOs to this process: %d", err, <-opened, len(sigio))
	if err != nil {
		t.Fatalf("place with a writer that opens and closes the file now and then: %v", err)
	}
	fd, err := unix.Open(dst, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("an open for writing of the placed binary: %v; place left a lease on it", err)
	}
	unix.Close(fd)
}

// TestReview14WithLeasesDisabledPlaceStillWaits: with fs.leases-enable=0 the doc comment says no
// lease can be taken (EINVAL) and awaitNoWriters does not wait, which would bring ETXTBSY back.
// In fact the kernel checks for writers first: F_SETLEASE answers EAGAIN while the file is open
// for writing and EINVAL only once it is not, so the wait still works. The placed binary must run.
func TestReview14WithLeasesDisabledPlaceStillWaits(t *testing.T) {
	const knob = "/proc/sys/fs/leases-enable"
	fixture.NeedRoot(t)
	old, err := os.ReadFile(knob)
	if err != nil {
		fixture.Missing(t, "cannot turn leases off here: %v", err)
	}
	if err := os.WriteFile(knob, []byte("0"), 0); err != nil {
		fixture.Missing(t, "cannot turn leases off here: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, old, 0); err != nil {
			t.Errorf("restore %s: %v", knob, err)
		}
	})
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1/tool"})
	src := newBinary(t, in)
	holdForWriting(t, src, 600*time.Millisecond)
	start := time.Now()
	dst, err := in.place(src)
	if err != nil {
		t.Fatalf("place with leases disabled: %v", err)
	}
	t.Logf("place with leases disabled took %v", time.Since(start))
	if err := exec.Command(dst).Run(); err != nil {
		t.Fatalf("the installed binary, run at once, with leases disabled: %v", err)
	}
}

// review14ChildEnv marks the re-executed test binary of TestReview14NonRootDaemonTakesTheLease.
const review14ChildEnv = "CLIHOST_REVIEW14_CHILD"

// TestReview14NonRootDaemonTakesTheLease: the shipped unit runs clihostd as User=clihost with an
// empty CapabilityBoundingSet (no CAP_LEASE). F_SETLEASE needs the caller to own the file or
// CAP_LEASE; the download is the daemon's own file, so the wait must work there too: a binary
// held open for writing by another process is refused after writersWait, one not held is
// accepted at once. (A file of another owner gets EACCES and is not waited for.)
func TestReview14NonRootDaemonTakesTheLease(t *testing.T) {
	if dir := os.Getenv(review14ChildEnv); dir != "" {
		review14NonRootChild(t, dir)
		return
	}
	fixture.NeedRoot(t) // to run a child as nobody
	dir, err := os.MkdirTemp("/var/tmp", "r14-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "install.test")
	if err := copyExecutable(os.Args[0], exe); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// A file of root's in nobody's directory, for the "other owner" case.
	other := filepath.Join(work, "root-owned")
	if err := os.WriteFile(other, []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestReview14NonRootDaemonTakesTheLease$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), review14ChildEnv+"="+work)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("child as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the child (a daemon that is not root) failed: %v", err)
	}
}

func review14NonRootChild(t *testing.T, dir string) {
	defer func(d time.Duration) { writersWait = d }(writersWait)
	writersWait = 300 * time.Millisecond
	if os.Geteuid() == 0 {
		t.Fatal("the child runs as root")
	}
	path := filepath.Join(dir, "tool")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := awaitNoWriters(path); err != nil {
		t.Fatalf("a file nobody writes: %v", err)
	}
	holdForWriting(t, path, 3*time.Second)
	err := awaitNoWriters(path)
	if err == nil || !strings.Contains(err.Error(), "open for writing") {
		t.Fatalf("a file another process holds open for writing, as a daemon without CAP_LEASE: %v; want the error", err)
	}
	t.Logf("held for writing: %v", err)
	// Another owner's file: F_SETLEASE is refused (EACCES) and awaitNoWriters does not wait.
	other := filepath.Join(dir, "root-owned")
	fd, err := unix.Open(other, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, lerr := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
	unix.Close(fd)
	t.Logf("lease on another owner's file: %v (awaitNoWriters treats this as 'no lease here')", lerr)
	if !errors.Is(lerr, unix.EACCES) {
		t.Errorf("lease on another owner's file: %v, want EACCES", lerr)
	}
}

// copyExecutable copies the file src to the new file dst, mode 0755, with no fork of this process
// while dst is open for writing (fixture.WriteFile).
func copyExecutable(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return fixture.WriteFile(dst, data, 0o755)
}
