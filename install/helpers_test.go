package install_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/manifest"
	"github.com/ulikunitz/xz"
)

// The tests install real files from a loopback HTTP server and run what they install. Package
// managers other than npm and go are stand-in scripts on a PATH the test controls: they record
// the command line clihost built and drop a binary where the real one would.

// binName is the bundle's bin in most tests: unique, so that it is never found on the host's PATH.
const binName = "clihosttesttool"

// toolScript is the fixture binary: a script that prints a version.
var toolScript = []byte("#!/bin/sh\necho clihosttesttool 1.0.0\n")

// bundle is a bundle with key clihosttesttool@1 and the given install entries.
func bundle(entries ...manifest.InstallMethod) *manifest.Bundle {
	return &manifest.Bundle{CLI: &manifest.CLI{ID: "clihosttesttool", Version: "1.0.0", Bin: binName, Install: entries}}
}

const key = "clihosttesttool@1"

// options are Options for a fresh state directory, a fixed platform and an empty environment.
func options(t *testing.T) install.Options {
	return install.Options{StateDir: t.TempDir(), OS: "linux", Arch: "x64", LookupEnv: envOf(nil)}
}

// envOf is a LookupEnv over a map.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// server serves files from memory on loopback and counts requests per path.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]int
}

func newServer(t *testing.T) *server {
	s := &server{files: map[string][]byte{}, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, ok := s.files[r.URL.Path]
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve publishes b at path and returns its URL.
func (s *server) serve(path string, b []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = b
	return s.URL + path
}

func (s *server) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// entry is one member of a test archive.
type entry struct {
	name, body string
	kind       byte   // tar type flag; 0 is a regular file
	link       string // symlink or hard link target
}

func tarball(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.kind, Linkname: e.link, Mode: 0o755, Size: int64(len(e.body))}
		if e.kind == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarGz(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(tarball(t, entries))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarXz(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	xw, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	xw.Write(tarball(t, entries))
	if err := xw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zipball writes entries; kind tar.TypeSymlink makes a zip symlink, a name ending in / a directory.
func zipball(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		switch {
		case e.kind == tar.TypeSymlink:
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		case strings.HasSuffix(e.name, "/"):
			h.SetMode(fs.ModeDir | 0o755)
		default:
			h.SetMode(0o755)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// runBin runs an installed binary and returns its trimmed output.
func runBin(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatalf("run %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

// binRootNames lists <StateDir>/bin, without the lock files.
func binRootNames(t *testing.T, stateDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(stateDir, "bin"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			names = append(names, e.Name())
		}
	}
	return names
}

// assertNothingPlaced checks that the bundle's bin directory was not created and no temporary
// files are left.
func assertNothingPlaced(t *testing.T, stateDir string) {
	t.Helper()
	if names := binRootNames(t, stateDir); len(names) > 0 {
		t.Errorf("%s/bin holds %v, want nothing", stateDir, names)
	}
	if _, err := os.Stat(install.BinDir(stateDir, key)); !os.IsNotExist(err) {
		t.Errorf("BinDir exists (err %v), want nothing placed", err)
	}
}

// recorder is a slog handler that reports messages on a channel.
type recorder struct{ msgs chan string }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	select {
	case r.msgs <- rec.Message:
	default: // nobody is listening any more
	}
	return nil
}
func (r recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r recorder) WithGroup(string) slog.Handler      { return r }

// counter counts calls; handy for servers.
type counter struct{ n atomic.Int64 }

func (c *counter) inc() int64 { return c.n.Add(1) }

// writeExec writes an executable file (mode 0755) through another process, install(1): a file this
// test process held open for writing could be inherited by a child a parallel test forks at that
// moment, and exec'ing it would then fail with ETXTBSY ("text file busy") until that child execs.
func writeExec(t *testing.T, path string, content []byte) {
	t.Helper()
	src := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("install", "-m", "0755", src, path).CombinedOutput(); err != nil {
		t.Fatalf("install %s: %v: %s", path, err, out)
	}
}
