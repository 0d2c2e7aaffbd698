package install_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"golang.org/x/sys/unix"
)

// crashChildEnv, set to "<state dir> <url> <sha256> [hold]", makes TestInstallSurvivesSIGKILL the
// child: it installs the download and says on stdout how far it got; with hold, it keeps the
// replaced binary's descriptor instead of freeing it, and says so.
const crashChildEnv = "CLIHOST_INSTALL_CRASH_CHILD"

// TestInstallSurvivesSIGKILL kills a real install process (this test binary, rerun) with SIGKILL
// at several points of a download replacing an installed binary: before the body, halfway, and at
// increasing delays after the last byte (hashing, fsync, rename, the directory fsync), after
// Install returned, and between the rename and the free of the replaced binary (the child holds
// it). Whatever the point, the binary's path holds the old binary or the new one, complete and
// executable, never a mix or a partial file; the next Install cleans up after the killed one and
// places the new binary; and a replaced binary the killed child still held is freed, leaving no
// name behind. (SIGKILL keeps the page cache: what a power cut would
// lose is the fsyncs' business, which this test cannot observe.)
func TestInstallSurvivesSIGKILL(t *testing.T) {
	if v := os.Getenv(crashChildEnv); v != "" {
		crashChild(t, v)
		return
	}
	t.Parallel()
	v1 := append([]byte("#!/bin/sh\necho clihosttesttool 1.0.0\n"), make([]byte, 1<<20)...)
	v2 := make([]byte, 24<<20+12345) // several chunks and a partial block at the end
	rand.NewChaCha8([32]byte{1}).Read(v2)
	copy(v2, "\x7fELF")

	s := newServer(t)
	held := make(chan struct{}, 1)
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := v1
		if strings.HasPrefix(r.URL.Path, "/v2") {
			body = v2
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		switch r.URL.Query().Get("hold") {
		case "start":
			w.(http.Flusher).Flush()
			held <- struct{}{}
			<-r.Context().Done()
		case "half":
			w.Write(body[:len(body)-len(body)/2]) // at least half: the child reports reaching it
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			w.Write(body)
		}
	})

	points := []struct {
		name  string
		query string        // how the server serves v2
		wait  string        // the child's line (or "held": the server's signal) to kill after
		after time.Duration // then this long
		hold  bool          // the child holds the replaced binary instead of freeing it
	}{
		{"before the body", "?hold=start", "held", 0, false},
		{"halfway", "?hold=half", "half", 0, false},
		{"at the last byte", "", "complete", 0, false},
		{"1ms after the last byte", "", "complete", time.Millisecond, false},
		{"5ms after the last byte", "", "complete", 5 * time.Millisecond, false},
		{"20ms after the last byte", "", "complete", 20 * time.Millisecond, false},
		{"80ms after the last byte", "", "complete", 80 * time.Millisecond, false},
		{"after Install returned", "", "installed", 0, false},
		{"between the rename and the free", "", "holding", 0, true},
	}
	for i, p := range points {
		t.Run(p.name, func(t *testing.T) {
			o := options(t)
			old, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: s.serve("/v1", v1), VerifySHA256: sum(v1)}), o)
			if err != nil {
				t.Fatal(err)
			}
			var oldInode *inodeHandle
			if p.hold {
				oldInode = handleOf(t, old.BinPath)
			}
			url := fmt.Sprintf("%s/v2-%d%s", s.URL, i, p.query)
			spec := o.StateDir + " " + url + " " + sum(v2)
			if p.hold {
				spec += " hold"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestInstallSurvivesSIGKILL$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+spec)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			proc := fixture.Start(t, cmd)
			lines := fixture.Follow(out)
			if p.wait == "held" {
				select {
				case <-held:
				case <-time.After(time.Minute):
					t.Fatal("the child never asked for the download")
				}
			} else if _, err := lines.Wait("crash-child: "+p.wait, time.Minute); err != nil {
				t.Fatalf("child: %v (output %q)", err, lines.All())
			}
			if p.hold {
				if fds := heldReplaced(t, cmd.Process.Pid, old.BinPath, false); len(fds) != 1 {
					t.Fatalf("the child holds descriptors %v on the replaced binary, want one", fds)
				}
				if oldInode != nil && !oldInode.alive(t) {
					t.Fatal("the replaced binary the child holds is already freed")
				}
			}
			time.Sleep(p.after)
			cmd.Process.Kill()
			lines.Drain()
			proc.Wait()

			got := checkWhole(t, old.BinPath, v1, v2)
			t.Logf("killed %s: the path holds %s", p.name, got)
			switch {
			case p.wait == "held" || p.wait == "half":
				if got != "the old binary" {
					t.Errorf("killed before the download ended, the path holds %s", got)
				}
			case p.wait == "installed" || p.wait == "holding":
				if got != "the new binary" {
					t.Errorf("killed after Install returned, the path holds %s", got)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := install.Install(ctx, bundle(manifest.InstallMethod{Method: "download", URL: s.serve("/v2", v2), VerifySHA256: sum(v2)}), o)
			if err != nil {
				t.Fatalf("the install after the kill: %v", err)
			}
			if checkWhole(t, res.BinPath, v1, v2) != "the new binary" {
				t.Error("the install after the kill did not place the new binary")
			}
			for _, n := range binRootNames(t, o.StateDir) {
				if strings.HasPrefix(n, ".tmp-") {
					t.Errorf("the killed install's %s is still there", n)
				}
			}
			if names := dirNames(t, filepath.Dir(res.BinPath)); !slices.Equal(names, []string{binName}) {
				t.Errorf("the bundle's bin directory holds %v, want only %s", names, binName)
			}
			if oldInode != nil && oldInode.alive(t) {
				t.Error("the replaced binary the killed child held was never freed")
			}
		})
	}
}

// inodeHandle names a file by its inode (name_to_handle_at), to find out later whether the file
// system has freed it even though no name leads to it any more.
type inodeHandle struct {
	h     unix.FileHandle
	mount string // a directory on the same file system
}

// handleOf takes path's handle. It needs root (open_by_handle_at wants CAP_DAC_READ_SEARCH):
// without it, it returns nil (the test then cannot see the inode freed), except under CI=true,
// where the test fails.
func handleOf(t *testing.T, path string) *inodeHandle {
	t.Helper()
	if os.Geteuid() != 0 {
		if fixture.CI() {
			t.Fatal("under CI=true the tests run as root: open_by_handle_at needs it")
		}
		t.Log("not root: whether the replaced binary is freed after the kill is not checked")
		return nil
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
	if err != nil {
		t.Fatalf("name_to_handle_at %s: %v", path, err)
	}
	return &inodeHandle{h: h, mount: filepath.Dir(path)}
}

// alive reports whether the inode still exists (open_by_handle_at does not return ESTALE).
func (i *inodeHandle) alive(t *testing.T) bool {
	t.Helper()
	m, err := unix.Open(i.mount, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(m)
	fd, err := unix.OpenByHandleAt(m, i.h, unix.O_PATH|unix.O_CLOEXEC)
	if errors.Is(err, unix.ESTALE) {
		return false
	}
	if err != nil {
		t.Fatalf("open_by_handle_at: %v", err)
	}
	unix.Close(fd)
	return true
}

// dirNames lists dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

// checkWhole says whether path holds old or new, whole and executable; anything else fails t.
func checkWhole(t *testing.T, path string, old, new []byte) string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the binary's path: %v", err)
	}
	if st.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (%v)", path, st.Mode())
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case bytes.Equal(got, old):
		return "the old binary"
	case bytes.Equal(got, new):
		return "the new binary"
	}
	t.Fatalf("%s holds %d bytes (sha256 %x) that are neither the old binary nor the new one", path, len(got), sha256.Sum256(got))
	return ""
}

// crashChild is the process TestInstallSurvivesSIGKILL kills: it installs the download named by
// spec and reports on stdout when half of it and all of it were received, and when Install returned.
func crashChild(t *testing.T, spec string) {
	f := strings.Fields(spec)
	if len(f) != 3 && len(f) != 4 {
		t.Fatalf("%s=%q: want the state dir, the url, the sha256 and optionally hold", crashChildEnv, spec)
	}
	var half bool
	held := make(chan int, 1)
	if len(f) == 4 && f[3] == "hold" {
		install.HoldReplaced(func(fd int) { held <- fd })
	}
	o := install.Options{StateDir: f[0], OS: "linux", Arch: "x64", LookupEnv: envOf(nil),
		Progress: func(done, total int64) {
			if !half && 2*done >= total {
				half = true
				fmt.Println("crash-child: half")
			}
			if done == total {
				fmt.Println("crash-child: complete")
			}
		}}
	if _, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: f[1], VerifySHA256: f[2]}), o); err != nil {
		t.Fatal(err)
	}
	fmt.Println("crash-child: installed")
	if len(f) == 4 {
		<-held
		fmt.Println("crash-child: holding")
	}
	time.Sleep(time.Minute) // the parent kills it here
	t.Error("not killed")
}
