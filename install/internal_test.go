package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clihost/clihost/manifest"
	"golang.org/x/sys/unix"
)

// newTestInstaller is an installer for a bundle with one entry, a fresh state directory and a
// fixed platform.
func newTestInstaller(t *testing.T, e manifest.InstallMethod) *installer {
	t.Helper()
	b := &manifest.Bundle{CLI: &manifest.CLI{ID: "tool", Version: "2.1.0", Bin: "tool", Install: []manifest.InstallMethod{e}}}
	in, err := newInstaller(b, Options{StateDir: t.TempDir(), OS: "linux", Arch: "x64",
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestToolCommandGo(t *testing.T) {
	for _, c := range []struct{ pkg, arg string }{
		{"github.com/cli/cli/v2/cmd/gh", "github.com/cli/cli/v2/cmd/gh@latest"},
		{"github.com/cli/cli/v2/cmd/gh@v2.40.0", "github.com/cli/cli/v2/cmd/gh@v2.40.0"},
		{"./cmd/gh", "./cmd/gh"},
	} {
		in := newTestInstaller(t, manifest.InstallMethod{Method: "go", Package: c.pkg})
		cmd := in.toolCommand(in.b.CLI.Install[0])
		if !slices.Equal(cmd.args, []string{"install", c.arg}) || cmd.tools[0] != "go" || cmd.root {
			t.Errorf("%s: %+v", c.pkg, cmd)
		}
	}
}

// serveOnce serves body on loopback and returns its URL; chunked hides the size.
func serveOnce(t *testing.T, body []byte, chunked bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if chunked {
			w.(http.Flusher).Flush()
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/file"
}

func TestLimits(t *testing.T) {
	script := append([]byte("#!/bin/sh\n"), bytes.Repeat([]byte("# padding\n"), 100)...)
	var tarBuf, gzBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	tw.WriteHeader(&tar.Header{Name: "padding", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20})
	tw.Write(make([]byte, 1<<20))
	tw.WriteHeader(&tar.Header{Name: "tool", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(script))})
	tw.Write(script)
	tw.Close()
	zw := gzip.NewWriter(&gzBuf)
	zw.Write(tarBuf.Bytes())
	zw.Close()
	archive := gzBuf.Bytes()

	for _, c := range []struct {
		name    string
		body    []byte
		chunked bool
		limits  limits
		want    string
	}{
		{"download announced", script, false, limits{download: 100, binary: 1 << 20, unpacked: 1 << 30}, "1010 bytes announced, more than the 100 allowed"},
		{"download streamed", script, true, limits{download: 100, binary: 1 << 20, unpacked: 1 << 30}, "more than the 100 bytes allowed"},
		{"raw binary", script, false, limits{download: 1 << 20, binary: 100, unpacked: 1 << 30}, "more than the 100 allowed"},
		{"extracted binary", archive, false, limits{download: 1 << 20, binary: 100, unpacked: 1 << 30}, `extract_bin "tool" is 1010 bytes, more than the 100 allowed`},
		{"unpacked", archive, false, limits{download: 1 << 20, binary: 1 << 20, unpacked: 1 << 19}, "expands beyond the size allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := newTestInstaller(t, manifest.InstallMethod{Method: "download", URL: serveOnce(t, c.body, c.chunked), ExtractBin: "tool"})
			in.limits = c.limits
			_, err := in.run(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if _, err := os.Stat(BinDir(in.o.StateDir, in.key)); !os.IsNotExist(err) {
				t.Errorf("BinDir exists: %v", err)
			}
		})
	}
}

func TestDefaultClientRefusesDowngrade(t *testing.T) {
	check := defaultClient().CheckRedirect
	req := func(s string) *http.Request {
		u, _ := url.Parse(s)
		return &http.Request{URL: u}
	}
	if err := check(req("http://example.com/x"), []*http.Request{req("https://example.com/x")}); err == nil {
		t.Error("https → http redirect allowed")
	}
	if err := check(req("https://cdn.example.com/x"), []*http.Request{req("https://example.com/x")}); err != nil {
		t.Errorf("https → https redirect refused: %v", err)
	}
}

func TestListingTruncates(t *testing.T) {
	l := listing{want: "bin/tool"}
	for i := range 20 {
		l.add(filepath.Join("dir", string(rune('a'+i))))
	}
	l.add("other/tool")
	msg := l.missing().Error()
	for _, want := range []string{"(21 files)", "files named tool: other/tool", "dir/a", "dir/h", "and 12 more"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}

// TestHoldsReplacedOnlyWhereOrphansAreReclaimed: place keeps a replaced binary alive across the
// rename only on file systems that free an unlinked inode without leaving a name; on NFS (.nfs*
// files) and FUSE (.fuse_hidden* files) a crash in that window would leave one behind for good.
// The same list says where awaitNoWriters trusts a refused lease: NFSv4 and SMB refuse one without
// a delegation or an oplock, whether or not anyone writes the file.
func TestHoldsReplacedOnlyWhereOrphansAreReclaimed(t *testing.T) {
	for _, c := range []struct {
		name  string
		magic uint32
		want  bool
	}{
		{"ext4", unix.EXT4_SUPER_MAGIC, true},
		{"xfs", unix.XFS_SUPER_MAGIC, true},
		{"btrfs", unix.BTRFS_SUPER_MAGIC, true},
		{"tmpfs", unix.TMPFS_MAGIC, true},
		{"overlayfs", unix.OVERLAYFS_SUPER_MAGIC, true},
		{"nfs", unix.NFS_SUPER_MAGIC, false},
		{"fuse", unix.FUSE_SUPER_MAGIC, false},
		{"cifs", unix.CIFS_SUPER_MAGIC, false},
		{"9p", unix.V9FS_MAGIC, false},
	} {
		if got := localFileSystem(c.magic); got != c.want {
			t.Errorf("%s: localFileSystem = %v, want %v", c.name, got, c.want)
		}
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "missing")
	if fd := holdReplaced(dir, dst); fd != -1 {
		unix.Close(fd)
		t.Errorf("holdReplaced of a missing file returned descriptor %d", fd)
	}
}

// TestRemoveInterrupted: the temporary directories of installs whose process is gone (no one holds
// the bundle's lock) are removed, whatever '-' the bundle's key holds; those of an install in
// progress (its lock held, here by another descriptor) are kept.
func TestRemoveInterrupted(t *testing.T) {
	state := t.TempDir()
	bin := filepath.Join(state, "bin")
	for _, d := range []string{".tmp-aws-cli@2-123456/download", ".tmp-jq@1-42", ".tmp-busy@1-7/download"} {
		if err := os.MkdirAll(filepath.Join(bin, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	unlock, err := lockKey(context.Background(), bin, "busy@1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	removed, err := RemoveInterrupted(state)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{filepath.Join(bin, ".tmp-aws-cli@2-123456"), filepath.Join(bin, ".tmp-jq@1-42")}; !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	if _, err := os.Stat(filepath.Join(bin, ".tmp-busy@1-7/download")); err != nil {
		t.Fatalf("the running install's directory: %v", err)
	}
	if removed, err := RemoveInterrupted(t.TempDir()); removed != nil || err != nil {
		t.Fatalf("a state directory without bin: %v %v", removed, err)
	}
}
