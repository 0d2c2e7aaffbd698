package install

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/clihost/clihost/manifest"
)

// randomBytes is n reproducible random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{2}).Read(b)
	return b
}

// newTempFile creates a new empty file in a fresh directory, as fetch does.
func newTempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "download"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestStreamCopiesEveryByte copies downloads of sizes around the chunk (the first one smaller) and
// block boundaries, written
// through (direct I/O where the file system has it) or not, and checks the file and the hash.
func TestStreamCopiesEveryByte(t *testing.T) {
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download"})
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	for _, size := range []int{0, 1, ioAlign - 1, ioAlign, 3*ioAlign + 7, firstChunkSize, firstChunkSize + 1,
		firstChunkSize + chunkSize, firstChunkSize + chunkSize + 1, chunkSize, chunkSize + 1, 3*chunkSize + 5000} {
		for _, through := range []bool{false, true} {
			src := randomBytes(size)
			f := newTempFile(t)
			w, err := newFileWriter(f, int64(size), through)
			if err != nil {
				t.Fatal(err)
			}
			if through {
				t.Logf("size %d: direct I/O %v", size, w.direct)
			}
			h := sha256.New()
			// short reads, as a socket gives: the stream fills whole chunks from them
			n, err := in.copyProgress(w, &shortReader{r: bytes.NewReader(src), max: 100_000}, h, int64(size), stall)
			if err != nil || n != int64(size) {
				t.Fatalf("size %d through %v: copied %d: %v", size, through, n, err)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if want := sha256.Sum256(src); !bytes.Equal(got, src) || !bytes.Equal(h.Sum(nil), want[:]) {
				t.Errorf("size %d through %v: the file (%d bytes) or the hash differs from the download", size, through, len(got))
			}
		}
	}
}

// TestFileWriterFallsBackFromDirectIO makes the kernel refuse a direct write (a buffer off the
// alignment) and checks that the same bytes then go through the page cache.
func TestFileWriterFallsBackFromDirectIO(t *testing.T) {
	f := newTempFile(t)
	src := randomBytes(2*ioAlign + 1)
	w, err := newFileWriter(f, int64(2*ioAlign), true)
	if err != nil {
		t.Fatal(err)
	}
	if !w.direct {
		t.Skip("this file system has no direct I/O")
	}
	if err := w.write(src[1:]); err != nil { // a whole number of blocks, misaligned in memory
		t.Fatal(err)
	}
	if w.direct {
		t.Error("direct I/O still on after the kernel refused a write")
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, src[1:]) {
		t.Errorf("the file holds %d bytes, not the %d written", len(got), len(src)-1)
	}
}

// TestStreamReportsWriteFailure closes the file under the stream: the copy stops and returns the
// write's error instead of hanging or reporting success.
func TestStreamReportsWriteFailure(t *testing.T) {
	in := newTestInstaller(t, manifest.InstallMethod{Method: "download"})
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	f := newTempFile(t)
	w, err := newFileWriter(f, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	n, err := in.copyProgress(w, io.LimitReader(zeros{}, 1<<30), sha256.New(), -1, stall)
	if err == nil {
		t.Fatal("copy into a closed file succeeded")
	}
	if n >= 1<<30 {
		t.Errorf("the copy read all %d bytes before reporting %v", n, err)
	}
}

// shortReader returns at most max bytes per Read.
type shortReader struct {
	r   io.Reader
	max int
}

func (s *shortReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.max)]) }

// zeros is an endless source of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestChunksAreHugePageAlignedAndUnmapped: a chunk's buffer starts on a huge page, is writable,
// and its mapping is gone once the chunk is dropped (no mapping leaks from the pool).
func TestChunksAreHugePageAlignedAndUnmapped(t *testing.T) {
	var addrs []uintptr
	for range 4 {
		c := newChunk()
		if len(c.buf) != chunkSize || uintptr(unsafe.Pointer(unsafe.SliceData(c.buf)))%hugePage != 0 {
			t.Fatalf("a chunk of %d bytes at %p, want %d on a %d boundary", len(c.buf), unsafe.SliceData(c.buf), chunkSize, hugePage)
		}
		c.buf[0], c.buf[chunkSize-1] = 1, 2
		addrs = append(addrs, uintptr(unsafe.Pointer(unsafe.SliceData(c.buf))))
	}
	deadline := time.Now().Add(time.Minute)
	for mapped := mappedOf(t, addrs); len(mapped) > 0; mapped = mappedOf(t, addrs) {
		if time.Now().After(deadline) {
			t.Fatalf("dropped chunks at %x are still mapped", mapped)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// mappedOf returns the addresses among addrs that lie in one of this process's mappings.
func mappedOf(t *testing.T, addrs []uintptr) []uintptr {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	var in []uintptr
	for line := range strings.Lines(string(maps)) {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err != nil {
			t.Fatalf("/proc/self/maps line %q: %v", line, err)
		}
		for _, a := range addrs {
			if lo <= a && a < hi {
				in = append(in, a)
			}
		}
	}
	return in
}
