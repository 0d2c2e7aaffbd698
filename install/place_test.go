package install_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"golang.org/x/sys/unix"
)

// versioned is a fixture binary printing version v, padded with size zero bytes after its script
// so that replacing it frees real blocks.
func versioned(v string, size int) []byte {
	return append([]byte("#!/bin/sh\necho clihosttesttool "+v+"\nexit 0\n"), make([]byte, size)...)
}

// TestInstallDoesNotWaitForTheReplacedBinaryFree replaces an installed binary while the test holds
// the replaced one's descriptor (the background free): Install returns with the new binary in place
// and durable while the old inode is still alive, unlinked, and the descriptor handed off is that
// inode's; and the free starts only once the install's temporary directory is gone (its removal
// must not queue behind the free). (Not parallel: it swaps the package's free function.)
func TestInstallDoesNotWaitForTheReplacedBinaryFree(t *testing.T) {
	o := options(t)
	if !install.HoldsReplacedIn(t.TempDir()) {
		fixture.Missing(t, "the test directory's file system is not one place holds replaced binaries on")
	}
	held := make(chan int, 1)
	var atFree []string // <StateDir>/bin when the free starts
	defer install.HoldReplaced(func(fd int) {
		atFree = binRootNames(t, o.StateDir)
		held <- fd
	})()
	s := newServer(t)
	v1, v2 := versioned("1.0.0", 4<<20), versioned("2.0.0", 1<<20)
	res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: s.serve("/v1", v1), VerifySHA256: sum(v1)}), o)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case fd := <-held:
		t.Fatalf("the first install, which replaced nothing, handed off descriptor %d", fd)
	default:
	}
	var old unix.Stat_t
	if err := unix.Stat(res.BinPath, &old); err != nil {
		t.Fatal(err)
	}

	res, err = install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: s.serve("/v2", v2), VerifySHA256: sum(v2)}), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := runBin(t, res.BinPath); got != "clihosttesttool 2.0.0" {
		t.Errorf("after the install the binary prints %q", got)
	}
	var fd int
	select {
	case fd = <-held:
	case <-time.After(time.Minute):
		t.Fatal("the replaced binary was never handed to the free")
	}
	defer unix.Close(fd)
	if !slices.Equal(atFree, []string{key}) {
		t.Errorf("when the free started, %s/bin held %v, want only %s (the temporary directory removed first)", o.StateDir, atFree, key)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino != old.Ino || st.Dev != old.Dev || st.Nlink != 0 || st.Size != int64(len(v1)) {
		t.Errorf("the held descriptor is inode %d on %d, %d links, %d bytes; want the replaced binary, inode %d on %d, unlinked, %d bytes",
			st.Ino, st.Dev, st.Nlink, st.Size, old.Ino, old.Dev, len(v1))
	}
}

// heldReplaced lists the descriptors of process pid that point at path's unlinked inodes (a
// replaced binary not yet freed), or with linked, at path itself too (what a failed rename left).
func heldReplaced(t *testing.T, pid int, path string, linked bool) []string {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && (target == path+" (deleted)" || linked && target == path) {
			fds = append(fds, e.Name())
		}
	}
	return fds
}

// TestReplacedBinariesAreReleased replaces a binary several times and finds every replaced inode
// released (no descriptor of this process left on one) soon after: the background free does run.
func TestReplacedBinariesAreReleased(t *testing.T) {
	t.Parallel()
	o := options(t)
	s := newServer(t)
	var path string
	for i := range 4 {
		v := versioned(strconv.Itoa(i), 2<<20)
		res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: s.serve("/v"+strconv.Itoa(i), v), VerifySHA256: sum(v)}), o)
		if err != nil {
			t.Fatal(err)
		}
		path = res.BinPath
	}
	assertReleased(t, path)
}

// TestPlaceOverHostileEntries installs where the binary's path already holds something no install
// put there: a FIFO (holding it must not open it, which would block), a symlink to a file outside
// the state directory (it is replaced, its target untouched), a hard link to a file outside the
// bin directory (replaced, the other name's file untouched), a character device and a socket
// (holding them must not open them), a directory (the install fails and leaves it). No descriptor
// on the replaced entry survives.
func TestPlaceOverHostileEntries(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	v := versioned("2.0.0", 0)
	url := s.serve("/v2", v)
	for _, c := range []struct {
		name    string
		plant   func(t *testing.T, path string)
		fails   bool
		outside string // "hard": the planted hard link's other name is checked unchanged (a symlink's target always is)
	}{
		{name: "fifo", plant: func(t *testing.T, path string) {
			if err := unix.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink out", plant: func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(target, []byte("victim"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "hard link to a file outside", plant: func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(path), "..", "victim-"+strconv.Itoa(os.Getpid()))
			if err := os.WriteFile(target, []byte("victim"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(target, path); err != nil {
				t.Fatal(err)
			}
		}, outside: "hard"},
		{name: "character device", plant: func(t *testing.T, path string) {
			fixture.NeedRoot(t)
			if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "socket", plant: func(t *testing.T, path string) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
				t.Skipf("cannot bind a socket at %s: %v", path, err) // a path longer than sun_path
			}
		}},
		{name: "directory", fails: true, plant: func(t *testing.T, path string) {
			if err := os.MkdirAll(filepath.Join(path, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := options(t)
			path := filepath.Join(install.BinDir(o.StateDir, key), binName)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			c.plant(t, path)
			var victim string
			if target, err := os.Readlink(path); err == nil {
				victim = target
			} else if c.outside == "hard" {
				victim = filepath.Join(filepath.Dir(path), "..", "victim-"+strconv.Itoa(os.Getpid()))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := install.Install(ctx, bundle(manifest.InstallMethod{Method: "download", URL: url, VerifySHA256: sum(v)}), o)
			switch {
			case c.fails && err == nil:
				t.Fatalf("installed over a directory at %s", res.BinPath)
			case c.fails:
				if st, serr := os.Lstat(filepath.Join(path, "sub")); serr != nil || !st.IsDir() {
					t.Errorf("the failed install changed the directory: %v", serr)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if st, serr := os.Lstat(res.BinPath); serr != nil || !st.Mode().IsRegular() {
					t.Fatalf("%s is not a regular file after the install: %v", res.BinPath, serr)
				}
				if got := runBin(t, res.BinPath); got != "clihosttesttool 2.0.0" {
					t.Errorf("the binary prints %q", got)
				}
			}
			if victim != "" {
				if b, err := os.ReadFile(victim); err != nil || string(b) != "victim" {
					t.Errorf("the planted entry's target changed: %q, %v", b, err)
				}
				if st, err := os.Stat(victim); err != nil || st.Mode().Perm() != 0o644 {
					t.Errorf("the planted entry's target's mode changed: %v, %v", st.Mode(), err)
				}
			}
			assertReleased(t, path)
		})
	}
}

// assertReleased waits (up to a minute) until this process holds no descriptor on what is or was
// at path.
func assertReleased(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for fds := heldReplaced(t, os.Getpid(), path, true); len(fds) > 0; fds = heldReplaced(t, os.Getpid(), path, true) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute on, descriptors %v still hold what was replaced at %s", fds, path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
