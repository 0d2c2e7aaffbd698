package install_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/manifest"
)

func TestPlatformFiltering(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	u := s.serve("/tool", toolScript)
	o := options(t)
	res, err := install.Install(context.Background(), bundle(
		manifest.InstallMethod{Method: "download", URL: u, OS: []string{"darwin"}},
		manifest.InstallMethod{Method: "download", URL: u, OS: []string{"linux"}, Arch: []string{"arm64"}},
		manifest.InstallMethod{Method: "download", URL: u, OS: []string{"Linux"}, Arch: []string{"amd64"}}, // Go spelling
	), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Index != 2 || len(res.Skipped) != 2 || s.hitCount("/tool") != 1 {
		t.Fatalf("result %+v, %d downloads", res, s.hitCount("/tool"))
	}
	if r := res.Skipped[0].Reason; !strings.Contains(r, "os [darwin] does not include this platform's linux") {
		t.Errorf("Skipped[0] = %q", r)
	}
	if r := res.Skipped[1].Reason; !strings.Contains(r, "arch [arm64] does not include this platform's x64") {
		t.Errorf("Skipped[1] = %q", r)
	}

	// requires.os excludes the whole bundle before any entry is tried.
	b := bundle(manifest.InstallMethod{Method: "download", URL: u})
	b.CLI.Requires = &manifest.Requires{OS: []string{"darwin", "windows"}}
	o = options(t)
	_, err = install.Install(context.Background(), b, o)
	if !errors.Is(err, install.ErrInstallFailed) || !strings.Contains(err.Error(), "requires.os [darwin windows]") {
		t.Fatalf("err = %v", err)
	}
	if s.hitCount("/tool") != 1 {
		t.Error("an entry was tried although requires.os excludes the platform")
	}
	assertNothingPlaced(t, o.StateDir)
}

func TestUnknownAndExperimentalSkipped(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	u := s.serve("/tool", toolScript)
	o := options(t)
	res, err := install.Install(context.Background(), bundle(
		manifest.InstallMethod{Method: "nix", Package: "tool"},
		manifest.InstallMethod{Method: "download", URL: u, Experimental: true},
		manifest.InstallMethod{Method: "download", URL: u},
	), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Index != 2 || len(res.Skipped) != 2 || s.hitCount("/tool") != 1 {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Skipped[0].Reason, `unknown install method "nix"`) || !strings.Contains(res.Skipped[1].Reason, "experimental") {
		t.Errorf("Skipped = %+v", res.Skipped)
	}

	_, err = install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "nix"}), options(t))
	if !errors.Is(err, install.ErrInstallFailed) || !strings.Contains(err.Error(), `install[0] (nix): skipped: unknown install method "nix"`) {
		t.Errorf("err = %v", err)
	}
}

func TestVendored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	writeExec(t, filepath.Join(dir, "bin", binName), toolScript)
	os.WriteFile(filepath.Join(dir, "bin", "plain"), toolScript, 0o644)
	writeExec(t, filepath.Join(outside, "tool"), toolScript)
	os.Symlink(filepath.Join(outside, "tool"), filepath.Join(dir, "bin", "escape"))
	os.Symlink(binName, filepath.Join(dir, "bin", "inside"))

	b := bundle(
		manifest.InstallMethod{Method: "vendored", Path: "./bin/missing"},
		manifest.InstallMethod{Method: "vendored", Path: "./bin/plain"},
		manifest.InstallMethod{Method: "vendored", Path: "./bin/escape"},
		manifest.InstallMethod{Method: "vendored", Path: "./bin"},
		manifest.InstallMethod{Method: "vendored", Path: "/bin/sh"},
		manifest.InstallMethod{Method: "vendored", Path: "./bin/inside"},
	)
	b.OSDir = dir
	res, err := install.Install(context.Background(), b, options(t))
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(dir, "bin", binName))
	if res.Index != 5 || res.BinPath != real {
		t.Fatalf("result %+v, want BinPath %s", res, real)
	}
	for i, want := range []string{"no such file", "not executable", "outside the bundle folder", "not a regular file", "must be relative"} {
		if !strings.Contains(res.Skipped[i].Reason, want) {
			t.Errorf("Skipped[%d] = %q, want %q", i, res.Skipped[i].Reason, want)
		}
	}

	embedded := bundle(manifest.InstallMethod{Method: "vendored", Path: "./bin/" + binName})
	_, err = install.Install(context.Background(), embedded, options(t))
	if err == nil || !strings.Contains(err.Error(), "skipped: the bundle is embedded") {
		t.Errorf("embedded bundle: err = %v", err)
	}
}

// curlScript is an installer that drops the tool into dir and records its environment.
func curlScript(dir string) []byte {
	return fmt.Appendf(nil, `#!/bin/sh
set -e
env > %[1]s/env.txt
printf '#!/bin/sh\necho clihosttesttool 1.0.0\n' > %[1]s/%[2]s
chmod 755 %[1]s/%[2]s
`, dir, binName)
}

func TestCurl(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pathDir := t.TempDir()
	script := curlScript(pathDir)
	u := s.serve("/install.sh", script)
	env := envOf(map[string]string{"PATH": pathDir + ":/usr/bin:/bin", "HOME": t.TempDir(), "SECRET_TOKEN": "hunter2"})

	// Without verify_sha256 and without AllowUnverified: refused, not even fetched.
	o := options(t)
	o.LookupEnv = env
	_, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "curl", URL: u}), o)
	if err == nil || !strings.Contains(err.Error(), "refused: a curl installer without verify_sha256") || s.hitCount("/install.sh") != 0 {
		t.Fatalf("err = %v, %d fetches", err, s.hitCount("/install.sh"))
	}

	// A wrong checksum: the script does not run.
	o = options(t)
	o.LookupEnv = env
	_, err = install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "curl", URL: u, VerifySHA256: sum(nil)}), o)
	var ce *install.ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ChecksumError", err)
	}
	if _, err := os.Stat(filepath.Join(pathDir, binName)); err == nil {
		t.Fatal("the script ran despite the checksum mismatch")
	}

	for _, c := range []struct {
		name  string
		entry manifest.InstallMethod
		allow bool
	}{
		{"verified", manifest.InstallMethod{Method: "curl", URL: u, VerifySHA256: sum(script)}, false},
		{"unverified allowed", manifest.InstallMethod{Method: "curl", URL: u}, true},
	} {
		os.Remove(filepath.Join(pathDir, binName))
		o := options(t)
		o.LookupEnv, o.AllowUnverified = env, c.allow
		res, err := install.Install(context.Background(), bundle(c.entry), o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if want := filepath.Join(pathDir, binName); res.BinPath != want {
			t.Errorf("%s: BinPath %s, want %s", c.name, res.BinPath, want)
		}
		if got := runBin(t, res.BinPath); got != "clihosttesttool 1.0.0" {
			t.Errorf("%s: output %q", c.name, got)
		}
		envOut, _ := os.ReadFile(filepath.Join(pathDir, "env.txt"))
		if strings.Contains(string(envOut), "SECRET_TOKEN") || !strings.Contains(string(envOut), "PATH="+pathDir) {
			t.Errorf("%s: the script's environment is not minimal:\n%s", c.name, envOut)
		}
		assertNoTemp(t, o.StateDir)
	}
}

// assertNoTemp checks that no temporary directory is left in <StateDir>/bin.
func assertNoTemp(t *testing.T, stateDir string) {
	t.Helper()
	for _, n := range binRootNames(t, stateDir) {
		if strings.HasPrefix(n, ".tmp-") {
			t.Errorf("temporary %s left in %s/bin", n, stateDir)
		}
	}
}

func TestConcurrentInstallsCoalesce(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	var hits counter
	srv := newServer(t)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.inc() == 1 {
			close(started)
		}
		<-release
		w.Write(toolScript)
	})
	o := options(t)
	b := bundle(manifest.InstallMethod{Method: "download", URL: srv.URL + "/tool", VerifySHA256: sum(toolScript)})

	const waiters = 3
	type outcome struct {
		res install.Result
		err error
	}
	results := make(chan outcome, waiters+1)
	go func() {
		res, err := install.Install(context.Background(), b, o)
		results <- outcome{res, err}
	}()
	<-started // the first install holds the bundle and is downloading

	rec := recorder{msgs: make(chan string, 16)}
	wo := o
	wo.Log = slog.New(rec)
	for range waiters {
		go func() {
			res, err := install.Install(context.Background(), b, wo)
			results <- outcome{res, err}
		}()
	}
	for n := 0; n < waiters; {
		if msg := <-rec.msgs; strings.Contains(msg, "waiting for a concurrent install") {
			n++
		}
	}
	close(release)
	for range waiters + 1 {
		out := <-results
		if out.err != nil || out.res.BinPath != filepath.Join(install.BinDir(o.StateDir, key), binName) {
			t.Errorf("result %+v, %v", out.res, out.err)
		}
	}
	if n := hits.n.Load(); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
}

func TestInterruptedInstall(t *testing.T) {
	t.Parallel()
	o := options(t)
	binRoot := filepath.Join(o.StateDir, "bin")

	// Leftovers of an interrupted install of this bundle (and of another one).
	mine := filepath.Join(binRoot, ".tmp-"+key+"-123456")
	theirs := filepath.Join(binRoot, ".tmp-other@1-123456")
	for _, d := range []string{mine, theirs} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "download"), toolScript[:5], 0o600)
	}
	s := newServer(t)
	v1 := append([]byte(nil), toolScript...)
	u1 := s.serve("/v1", v1)
	res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "download", URL: u1, VerifySHA256: sum(v1)}), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("leftover %s not removed (%v)", mine, err)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("another bundle's temporary directory was removed: %v", err)
	}

	// A second install is cut off mid-download: the installed binary stays whole.
	v2 := append([]byte("#!/bin/sh\necho clihosttesttool 2.0.0\n"), make([]byte, 1<<20)...)
	halfway := make(chan struct{})
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(v2)))
		w.Write(v2[:len(v2)/2])
		w.(http.Flusher).Flush()
		close(halfway)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := install.Install(ctx, bundle(manifest.InstallMethod{Method: "download", URL: s.URL + "/v2", VerifySHA256: sum(v2)}), o)
		done <- err
	}()
	<-halfway
	if got, _ := os.ReadFile(res.BinPath); string(got) != string(v1) {
		t.Errorf("during the second install BinPath holds %q, want the first binary", got)
	}
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || !errors.Is(err, install.ErrInstallFailed) {
		t.Fatalf("err = %v, want context.Canceled and ErrInstallFailed", err)
	}
	if got, _ := os.ReadFile(res.BinPath); string(got) != string(v1) {
		t.Errorf("after the interrupted install BinPath holds %q, want the first binary", got)
	}
	for _, n := range binRootNames(t, o.StateDir) {
		if strings.HasPrefix(n, ".tmp-"+key) {
			t.Errorf("temporary %s left behind", n)
		}
	}
}

func TestWaiterRetriesWhenFirstCallerGivesUp(t *testing.T) {
	t.Parallel()
	var hits counter
	first := make(chan struct{})
	srv := newServer(t)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.inc() == 1 {
			close(first)
			<-r.Context().Done() // the first caller's download never finishes
			return
		}
		w.Write(toolScript)
	})
	o := options(t)
	b := bundle(manifest.InstallMethod{Method: "download", URL: srv.URL + "/tool", VerifySHA256: sum(toolScript)})
	ctx, cancel := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() {
		_, err := install.Install(ctx, b, o)
		firstDone <- err
	}()
	<-first
	rec := recorder{msgs: make(chan string, 16)}
	wo := o
	wo.Log = slog.New(rec)
	type outcome struct {
		res install.Result
		err error
	}
	second := make(chan outcome, 1)
	go func() {
		res, err := install.Install(context.Background(), b, wo)
		second <- outcome{res, err}
	}()
	for msg := range rec.msgs {
		if strings.Contains(msg, "waiting for a concurrent install") {
			break
		}
	}
	cancel()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v", err)
	}
	out := <-second
	if out.err != nil {
		t.Fatalf("waiting caller: %v", out.err)
	}
	if got := runBin(t, out.res.BinPath); got != "clihosttesttool 1.0.0" {
		t.Errorf("output %q", got)
	}
	if n := hits.n.Load(); n != 2 {
		t.Errorf("%d downloads, want 2 (the abandoned one and the waiter's own)", n)
	}
}
