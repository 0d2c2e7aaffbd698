package install_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// crashChildEnv, set to "<state dir> <url> <sha256>", makes TestInstallSurvivesSIGKILL the child:
// it installs the download and says on stdout how far it got.
const crashChildEnv = "CLIHOST_INSTALL_CRASH_CHILD"

// TestInstallSurvivesSIGKILL kills a real install process (this test binary, rerun) with SIGKILL
// at several points of a download replacing an installed binary: before the body, halfway, and at
// increasing delays after the last byte (hashing, fsync, rename, the directory fsync), and after
// Install returned. Whatever the point, the binary's path holds the old binary or the new one,
// complete and executable, never a mix or a partial file; and the next Install cleans up after
// the killed one and places the new binary. (SIGKILL keeps the page cache: what a power cut would
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
	}{
		{"before the body", "?hold=start", "held", 0},
		{"halfway", "?hold=half", "half", 0},
		{"at the last byte", "", "complete", 0},
		{"1ms after the last byte", "", "complete", time.Millisecond},
		{"5ms after the last byte", "", "complete", 5 * time.Millisecond},
		{"20ms after the last byte", "", "complete", 20 * time.Millisecond},
		{"80ms after the last byte", "", "complete", 80 * time.Millisecond},
		{"after Install returned", "", "installed", 0},
	}
	for i, p := range points {
		t.Run(p.name, func(t *testing.T) {
			o := options(t)
			old, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: s.serve("/v1", v1), VerifySHA256: sum(v1)}), o)
			if err != nil {
				t.Fatal(err)
			}
			url := fmt.Sprintf("%s/v2-%d%s", s.URL, i, p.query)
			cmd := exec.Command(os.Args[0], "-test.run=^TestInstallSurvivesSIGKILL$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+o.StateDir+" "+url+" "+sum(v2))
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
			case p.wait == "installed":
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
		})
	}
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
	if len(f) != 3 {
		t.Fatalf("%s=%q: want the state dir, the url and the sha256", crashChildEnv, spec)
	}
	var half bool
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
	time.Sleep(time.Minute) // the parent kills it here
	t.Error("not killed")
}
