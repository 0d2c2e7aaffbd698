package install_test

import (
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

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
// fsync, rename. Compare its MB/s with BenchmarkRawTransfer's. Both also report the CPU time the
// process (client and server) spent per operation, which a machine shared with other work
// disturbs less than the wall time.
func BenchmarkDownloadInstall(b *testing.B) {
	url, body := benchServer(b)
	o := install.Options{StateDir: b.TempDir(), OS: "linux", Arch: "x64", LookupEnv: envOf(nil)}
	bun := bundle(manifest.InstallMethod{Method: "download", URL: url, VerifySHA256: sum(body)})
	b.SetBytes(benchSize)
	defer reportCPU(b, nil)()
	for b.Loop() {
		if _, err := install.Install(context.Background(), bun, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDownloadFirstInstall is BenchmarkDownloadInstall into a fresh state directory each
// time: no previous binary is replaced, so the file system does not free 64 MiB during the rename
// (the previous state directory is removed with the timer stopped).
func BenchmarkDownloadFirstInstall(b *testing.B) {
	url, body := benchServer(b)
	bun := bundle(manifest.InstallMethod{Method: "download", URL: url, VerifySHA256: sum(body)})
	b.SetBytes(benchSize)
	root := b.TempDir()
	var untimed time.Duration // CPU spent with the timer stopped, not reported
	defer reportCPU(b, &untimed)()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		c0 := cpuTime(b)
		os.RemoveAll(filepath.Join(root, strconv.Itoa(i-1)))
		syscall.Sync()
		untimed += cpuTime(b) - c0
		o := install.Options{StateDir: filepath.Join(root, strconv.Itoa(i)), OS: "linux", Arch: "x64", LookupEnv: envOf(nil)}
		b.StartTimer()
		if _, err := install.Install(context.Background(), bun, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDownloadReinstall is BenchmarkDownloadInstall with the machine left idle for 100 ms
// (timer stopped) before each install: what one reinstall costs its caller, without the previous
// iteration's leftover disk work (freeing the binary it replaced) queued in front of it.
func BenchmarkDownloadReinstall(b *testing.B) {
	url, body := benchServer(b)
	o := install.Options{StateDir: b.TempDir(), OS: "linux", Arch: "x64", LookupEnv: envOf(nil)}
	bun := bundle(manifest.InstallMethod{Method: "download", URL: url, VerifySHA256: sum(body)})
	if _, err := install.Install(context.Background(), bun, o); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	var untimed time.Duration // CPU spent with the timer stopped, not reported
	defer reportCPU(b, &untimed)()
	for b.Loop() {
		b.StopTimer()
		c0 := cpuTime(b)
		time.Sleep(100 * time.Millisecond)
		untimed += cpuTime(b) - c0
		b.StartTimer()
		if _, err := install.Install(context.Background(), bun, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSHA256 hashes the same 64 MiB in memory: no transfer can be verified faster.
func BenchmarkSHA256(b *testing.B) {
	body := make([]byte, benchSize)
	b.SetBytes(benchSize)
	defer reportCPU(b, nil)()
	for b.Loop() {
		sha256.Sum256(body)
	}
}

// BenchmarkRawTransfer fetches the same bytes from the same server into io.Discard.
func BenchmarkRawTransfer(b *testing.B) {
	url, _ := benchServer(b)
	b.SetBytes(benchSize)
	defer reportCPU(b, nil)()
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

// reportCPU starts counting the process's CPU time; the function it returns reports it per
// operation as cpu-ms/op, less *untimed when untimed is not nil.
func reportCPU(b *testing.B, untimed *time.Duration) func() {
	start := cpuTime(b)
	return func() {
		used := cpuTime(b) - start
		if untimed != nil {
			used -= *untimed
		}
		b.ReportMetric(float64(used)/1e6/float64(b.N), "cpu-ms/op")
	}
}

// cpuTime is the user and system time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
