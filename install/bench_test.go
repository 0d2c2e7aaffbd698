package install_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/manifest"
)

// benchSize is the size of the benchmarks' binary.
const benchSize = 64 << 20

// benchServer serves a 64 MiB raw "binary" (an ELF magic, then random bytes) on loopback.
func benchServer(b *testing.B) (url string, body []byte) {
	body = make([]byte, benchSize)
	rand.NewChaCha8([32]byte{}).Read(body)
	copy(body, "\x7fELF")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/tool", body
}

// BenchmarkDownloadInstall installs a 64 MiB raw binary: GET, sha256 and write in one pass, verify,
// fsync, rename. Compare its MB/s with BenchmarkRawTransfer's.
func BenchmarkDownloadInstall(b *testing.B) {
	url, body := benchServer(b)
	o := install.Options{StateDir: b.TempDir(), OS: "linux", Arch: "x64", LookupEnv: envOf(nil)}
	bun := bundle(manifest.InstallMethod{Method: "download", URL: url, VerifySHA256: sum(body)})
	b.SetBytes(benchSize)
	for b.Loop() {
		if _, err := install.Install(context.Background(), bun, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawTransfer fetches the same bytes from the same server into io.Discard.
func BenchmarkRawTransfer(b *testing.B) {
	url, _ := benchServer(b)
	b.SetBytes(benchSize)
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != benchSize {
			b.Fatalf("read %d bytes: %v", n, err)
		}
	}
}
