package install_test

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

func TestBinDir(t *testing.T) {
	if got := install.BinDir("/state", "gh@2"); got != "/state/bin/gh@2" {
		t.Fatalf("BinDir = %q", got)
	}
}

func TestDownloadFormats(t *testing.T) {
	t.Parallel()
	fixture.Need(t, "/bin/true") // a raw ELF binary to serve
	elf, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	files := []entry{
		{name: "tool-1.0/", kind: tar.TypeDir},
		{name: "tool-1.0/README.md", body: "readme"},
		{name: "tool-1.0/bin/" + binName, body: string(toolScript)},
		{name: "tool-1.0/bin/alias", kind: tar.TypeSymlink, link: binName},
	}
	dotted := []entry{{name: "./tool-1.0/bin/" + binName, body: string(toolScript)}}
	zipFiles := append(append([]entry(nil), files[:3]...), entry{name: "tool-1.0/bin/alias", kind: tar.TypeSymlink, link: binName})
	cases := []struct {
		name, extract string
		body          []byte
		want          string // the binary's output; "" for /bin/true
	}{
		{"tar.gz", "tool-1.0/bin/" + binName, tarGz(t, files), "clihosttesttool 1.0.0"},
		{"tar.xz", "tool-1.0/bin/" + binName, tarXz(t, files), "clihosttesttool 1.0.0"},
		{"zip", "tool-1.0/bin/" + binName, zipball(t, zipFiles), "clihosttesttool 1.0.0"},
		{"tar.gz with ./ entries", "tool-1.0/bin/" + binName, tarGz(t, dotted), "clihosttesttool 1.0.0"},
		{"./ in extract_bin", "./tool-1.0/bin/" + binName, tarGz(t, files), "clihosttesttool 1.0.0"},
		{"raw script", "tool-linux-x64", toolScript, "clihosttesttool 1.0.0"},
		{"raw ELF", "true", elf, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := options(t)
			var last, total int64
			o.Progress = func(d, n int64) { last, total = d, n }
			u := s.serve("/"+strings.ReplaceAll(c.name, " ", "_"), c.body)
			res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{
				Method: "download", URL: u, ExtractBin: c.extract, VerifySHA256: sum(c.body)}), o)
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(install.BinDir(o.StateDir, key), binName)
			if res.BinPath != want || res.Method != "download" || res.Index != 0 || len(res.Skipped) != 0 {
				t.Fatalf("result %+v, want BinPath %s", res, want)
			}
			st, err := os.Stat(res.BinPath)
			if err != nil || st.Mode().Perm() != 0o755 {
				t.Fatalf("installed binary: %v, mode %v", err, st.Mode())
			}
			if got := runBin(t, res.BinPath); got != c.want {
				t.Errorf("output %q, want %q", got, c.want)
			}
			if last != int64(len(c.body)) || total != int64(len(c.body)) {
				t.Errorf("last progress %d/%d, want %d/%d", last, total, len(c.body), len(c.body))
			}
			if names := binRootNames(t, o.StateDir); len(names) != 1 || names[0] != key {
				t.Errorf("%s/bin holds %v, want only %s", o.StateDir, names, key)
			}
		})
	}
}

func TestChecksumMismatchPlacesNothing(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := tarGz(t, []entry{{name: binName, body: string(toolScript)}})
	u := s.serve("/tool.tar.gz", body)
	wrong := sum([]byte("something else"))
	o := options(t)
	bundleDir := t.TempDir()
	writeExec(t, filepath.Join(bundleDir, binName), toolScript)
	b := bundle(
		manifest.InstallMethod{Method: "download", URL: u, ExtractBin: binName, VerifySHA256: strings.ToUpper(wrong)},
		manifest.InstallMethod{Method: "vendored", Path: binName}, // would succeed: must not be tried
	)
	b.OSDir = bundleDir
	res, err := install.Install(context.Background(), b, o)
	var ce *install.ChecksumError
	if !errors.As(err, &ce) || !errors.Is(err, install.ErrInstallFailed) {
		t.Fatalf("err = %v, want a ChecksumError wrapping ErrInstallFailed", err)
	}
	if ce.Expected != wrong || ce.Actual != sum(body) || ce.URL != u {
		t.Errorf("ChecksumError %+v, want expected %s actual %s", ce, wrong, sum(body))
	}
	if !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), sum(body)) {
		t.Errorf("error %q does not name both hashes", err)
	}
	if len(res.Skipped) != 1 || res.BinPath != "" {
		t.Errorf("result %+v: the vendored entry must not be tried after a checksum mismatch", res)
	}
	assertNothingPlaced(t, o.StateDir)
}

func TestArchiveTraversalRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	outside := t.TempDir()
	good := entry{name: "tool/" + binName, body: string(toolScript)}
	cases := []struct {
		name    string
		body    func() []byte
		extract string
		want    string // in the error
	}{
		{"dotdot", func() []byte { return tarGz(t, []entry{good, {name: "../evil", body: "x"}}) }, "tool/" + binName, `entry "../evil"`},
		{"dotdot inside", func() []byte { return tarGz(t, []entry{good, {name: "tool/../../evil", body: "x"}}) }, "tool/" + binName, `".." component`},
		{"absolute", func() []byte { return tarGz(t, []entry{{name: filepath.Join(outside, "x"), body: "x"}, good}) }, "tool/" + binName, "absolute path"},
		{"symlink to /etc/passwd", func() []byte {
			return tarXz(t, []entry{good, {name: "tool/passwd", kind: tar.TypeSymlink, link: "/etc/passwd"}})
		}, "tool/" + binName, `points to "/etc/passwd"`},
		{"relative symlink escaping", func() []byte {
			return tarGz(t, []entry{good, {name: "tool/up", kind: tar.TypeSymlink, link: "../../" + filepath.Base(outside)}})
		}, "tool/" + binName, "outside the archive"},
		{"hardlink escaping", func() []byte {
			return tarGz(t, []entry{good, {name: "tool/hard", kind: tar.TypeLink, link: "../outside/x"}})
		}, "tool/" + binName, `hard link "tool/hard"`},
		{"zip dotdot", func() []byte { return zipball(t, []entry{good, {name: "../evil", body: "x"}}) }, "tool/" + binName, `entry "../evil"`},
		{"zip backslash dotdot", func() []byte { return zipball(t, []entry{good, {name: `..\evil`, body: "x"}}) }, "tool/" + binName, `".." component`},
		{"zip symlink to /etc/passwd", func() []byte {
			return zipball(t, []entry{good, {name: "tool/passwd", kind: tar.TypeSymlink, link: "/etc/passwd"}})
		}, "tool/" + binName, `points to "/etc/passwd"`},
		{"extract_bin is a symlink", func() []byte {
			return tarGz(t, []entry{good, {name: "tool/alias", kind: tar.TypeSymlink, link: binName}})
		}, "tool/alias", "is a symbolic link"},
		{"extract_bin is a hard link", func() []byte {
			return tarGz(t, []entry{good, {name: "tool/alias", kind: tar.TypeLink, link: "tool/" + binName}})
		}, "tool/alias", "is a hard link"},
		{"extract_bin is a directory", func() []byte {
			return tarGz(t, []entry{good, {name: "tool/dir/", kind: tar.TypeDir}})
		}, "tool/dir", "not a regular file"},
		{"extract_bin escapes", func() []byte { return tarGz(t, []entry{good}) }, "../" + binName, `extract_bin "../clihosttesttool"`},
		{"duplicate extract_bin", func() []byte { return tarGz(t, []entry{good, good}) }, "tool/" + binName, "more than once"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := c.body()
			u := s.serve("/evil"+string(rune('a'+i)), body)
			o := options(t)
			res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{
				Method: "download", URL: u, ExtractBin: c.extract, VerifySHA256: sum(body)}), o)
			if !errors.Is(err, install.ErrInstallFailed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
			if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, c.want) {
				t.Errorf("Skipped = %+v", res.Skipped)
			}
			assertNothingPlaced(t, o.StateDir)
			if names, _ := os.ReadDir(outside); len(names) > 0 {
				t.Errorf("something was written outside: %v", names)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(o.StateDir), "evil")); err == nil {
				t.Error("evil was written next to the state directory")
			}
		})
	}
}

func TestMissingExtractBinListsEntries(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := tarGz(t, []entry{
		{name: "tool-1.0/README.md", body: "r"},
		{name: "tool-1.0/bin/" + binName, body: string(toolScript)},
		{name: "tool-1.0/LICENSE", body: "l"},
	})
	u := s.serve("/tool.tar.gz", body)
	o := options(t)
	_, err := install.Install(context.Background(), bundle(manifest.InstallMethod{
		Method: "download", URL: u, ExtractBin: "bin/" + binName, VerifySHA256: sum(body)}), o)
	for _, want := range []string{`extract_bin "bin/clihosttesttool" is not in the archive (3 files)`,
		"files named clihosttesttool: tool-1.0/bin/clihosttesttool", "tool-1.0/README.md", "tool-1.0/LICENSE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
	assertNothingPlaced(t, o.StateDir)
}

func TestDownloadFailuresFallThrough(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	html := s.serve("/page", []byte("<!DOCTYPE html><html>not found</html>"))
	good := s.serve("/tool", toolScript)
	o := options(t)
	res, err := install.Install(context.Background(), bundle(
		manifest.InstallMethod{Method: "download", URL: s.URL + "/missing", ExtractBin: binName},
		manifest.InstallMethod{Method: "download", URL: html, ExtractBin: binName},
		manifest.InstallMethod{Method: "download", URL: "ftp://example.com/x", ExtractBin: binName},
		manifest.InstallMethod{Method: "download", URL: good, VerifySHA256: "abc"},
		manifest.InstallMethod{Method: "download", URL: good},
	), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Index != 4 || len(res.Skipped) != 4 {
		t.Fatalf("result %+v", res)
	}
	for i, want := range []string{"404 Not Found", `not a tar.gz, tar.xz or zip archive nor an executable (it starts with "<!DOCT`,
		"only http and https", "not 64 hex digits"} {
		if !strings.Contains(res.Skipped[i].Reason, want) {
			t.Errorf("Skipped[%d] = %q, want %q", i, res.Skipped[i].Reason, want)
		}
	}
	if got := runBin(t, res.BinPath); got != "clihosttesttool 1.0.0" {
		t.Errorf("output %q", got)
	}
}
