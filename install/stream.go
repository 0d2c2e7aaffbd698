package install

import (
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// chunkSize is what a download is read, hashed and written in: large, so that the disk gets
	// few big writes and the goroutines few hand-offs; a multiple of every direct-I/O alignment.
	chunkSize = 2 << 20
	// firstChunkSize is the size of a download's first chunk: small, so that the hash (the
	// slowest of the three) starts on the first bytes rather than after a whole chunk.
	firstChunkSize = 256 << 10
	// chunksInFlight is how many chunks the reader may be ahead of the hash and the disk.
	chunksInFlight = 4
	// ioAlign is the memory and file-offset alignment used for direct I/O (a page: it covers the
	// logical block size of every common device).
	ioAlign = 4096
	// hugePage is the size of a transparent huge page with 4 KiB base pages (amd64, arm64).
	hugePage = 2 << 20
)

// chunk is one buffer of a download on its way to the hash and to the file; refs counts the two
// consumers still using it.
type chunk struct {
	buf  []byte // ioAlign-aligned, chunkSize long
	n    int    // bytes of buf holding data
	refs atomic.Int32
}

// chunks keeps chunk buffers between downloads: each download needs chunksInFlight of them, and
// allocating (zeroing) them anew for every download costs a millisecond and GC cycles.
var chunks = sync.Pool{New: func() any { return newChunk() }}

// newChunk allocates a chunk whose buffer is mapped outside the Go heap, aligned on a huge page and
// advised to be backed by huge pages (MADV_HUGEPAGE: a common default is "madvise" only). The
// socket reads copy into it, and each O_DIRECT write pins it, one 2 MiB page at a time instead of
// 512 small ones: about 6 of the 78 CPU milliseconds of a 64 MiB install. The mapping is removed
// once the pool drops the chunk. If mmap fails the buffer is aligned Go memory, and where the
// kernel has no huge pages for it, small pages back it as before.
func newChunk() *chunk {
	mem, err := unix.Mmap(-1, 0, chunkSize+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return &chunk{buf: alignedBuffer(chunkSize)}
	}
	skip := (hugePage - int(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%hugePage)) % hugePage
	c := &chunk{buf: mem[skip : skip+chunkSize : skip+chunkSize]}
	_ = unix.Madvise(c.buf, unix.MADV_HUGEPAGE) // EINVAL: no transparent huge pages in this kernel
	runtime.AddCleanup(c, func(mem []byte) { _ = unix.Munmap(mem) }, mem)
	return c
}

// stream copies a download into its file and into its hash: the caller's goroutine reads, one
// goroutine hashes (SHA-256 is slower than loopback delivers bytes) and one writes, each chunk
// going to both at once. A chunk returns to the free list when both are done with it.
type stream struct {
	free   chan *chunk
	toHash chan *chunk
	toFile chan *chunk
	wg     sync.WaitGroup
	failed atomic.Bool // the writer has failed; werr says why
	werr   error
}

// newStream starts the hashing and writing goroutines for one download into h and w.
func newStream(h hash.Hash, w *fileWriter) *stream {
	s := &stream{
		free:   make(chan *chunk, chunksInFlight),
		toHash: make(chan *chunk, chunksInFlight),
		toFile: make(chan *chunk, chunksInFlight),
	}
	for range chunksInFlight {
		s.free <- chunks.Get().(*chunk)
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for c := range s.toHash {
			h.Write(c.buf[:c.n]) // a hash.Hash never fails to write
			s.release(c)
		}
	}()
	go func() {
		defer s.wg.Done()
		for c := range s.toFile {
			if s.werr == nil {
				if s.werr = w.write(c.buf[:c.n]); s.werr != nil {
					s.failed.Store(true)
				}
			}
			s.release(c)
		}
	}()
	return s
}

// send hands a filled chunk to the hash and the file.
func (s *stream) send(c *chunk) {
	c.refs.Store(2)
	s.toHash <- c
	s.toFile <- c
}

// release is called by each consumer when it is done with c.
func (s *stream) release(c *chunk) {
	if c.refs.Add(-1) == 0 {
		s.free <- c
	}
}

// close waits until every chunk sent is hashed and written, gives the chunks back to the pool and
// returns the writer's error.
func (s *stream) close() error {
	close(s.toHash)
	close(s.toFile)
	s.wg.Wait()
	for range chunksInFlight {
		chunks.Put(<-s.free)
	}
	return s.werr
}

// copyProgress copies src into f and into h in chunks (stream), reporting progress and pushing the
// stall timer back on every read. Once it returns, h holds every byte copied and every write into f
// has finished.
func (in *installer) copyProgress(f *fileWriter, src io.Reader, h hash.Hash, total int64, stall *time.Timer) (n int64, err error) {
	s := newStream(h, f)
	defer func() {
		if werr := s.close(); err == nil && werr != nil {
			err = werr
		}
	}()
	size := firstChunkSize
	for {
		c := <-s.free
		nr, rerr := in.fill(c.buf[:size], src, stall, n, total)
		size = chunkSize
		n += int64(nr)
		if c.n = nr; nr > 0 {
			s.send(c)
		} else {
			s.free <- c
		}
		switch {
		case rerr == io.EOF:
			return n, nil
		case rerr != nil:
			return n, rerr
		case s.failed.Load():
			return n, nil // close reports the writer's error
		}
	}
}

// fill reads src into buf until buf is full or src ends (io.EOF, with the bytes read), reporting
// each read to the stall timer and to Options.Progress (done counts the bytes before buf).
func (in *installer) fill(buf []byte, src io.Reader, stall *time.Timer, done, total int64) (int, error) {
	n := 0
	for n < len(buf) {
		nr, err := src.Read(buf[n:])
		if nr > 0 {
			n += nr
			stall.Reset(stallTimeout)
			if in.o.Progress != nil {
				in.o.Progress(done+int64(n), total)
			}
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// alignedBuffer returns n bytes starting at an ioAlign boundary.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+ioAlign)
	skip := (ioAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%ioAlign)) % ioAlign
	return b[skip : skip+n : skip+n]
}

// fileWriter writes a download sequentially into its file. In write-through mode (a binary that
// will be placed, hence fsynced) it writes whole aligned blocks with O_DIRECT, so the data goes to
// the disk while the download runs instead of into the page cache for the fsync to flush at the
// end; the last partial block, and everything on a file system that refuses direct I/O, is written
// through the page cache. Either way the caller's fsync is what makes the file durable.
type fileWriter struct {
	f      *os.File
	off    int64
	direct bool
}

// newFileWriter prepares f (new and empty) for a download of total bytes (-1: unknown). With
// through, it turns on direct I/O where the file system allows it and reserves total bytes up front
// (no extending writes, and a full disk is found before the download).
func newFileWriter(f *os.File, total int64, through bool) (*fileWriter, error) {
	w := &fileWriter{f: f}
	if !through {
		return w, nil
	}
	if total > 0 {
		if err := w.control(func(fd int) error { return unix.Fallocate(fd, 0, 0, total) }); err != nil &&
			!errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("reserve %d bytes: %w", total, err)
		}
	}
	w.direct = w.setDirect(true) == nil // EINVAL: this file system has no direct I/O
	return w, nil
}

// write appends b to the file.
func (w *fileWriter) write(b []byte) error {
	if w.direct {
		whole := len(b) &^ (ioAlign - 1)
		if whole > 0 {
			_, err := w.f.WriteAt(b[:whole], w.off)
			switch {
			case err == nil:
				w.off += int64(whole)
				b = b[whole:]
			case !errors.Is(err, unix.EINVAL):
				return err
			}
			// EINVAL: the device wants a coarser alignment; the same bytes go through the page cache
		}
		if len(b) > 0 {
			if err := w.setDirect(false); err != nil {
				return fmt.Errorf("turn direct I/O off: %w", err)
			}
			w.direct = false
		}
	}
	_, err := w.f.WriteAt(b, w.off)
	w.off += int64(len(b))
	return err
}

// setDirect turns O_DIRECT on or off for the file.
func (w *fileWriter) setDirect(on bool) error {
	return w.control(func(fd int) error {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			return err
		}
		if on {
			fl |= unix.O_DIRECT
		} else {
			fl &^= unix.O_DIRECT
		}
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
		return err
	})
}

// control runs op on the file's descriptor.
func (w *fileWriter) control(op func(fd int) error) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = op(int(fd)) }); err != nil {
		return err
	}
	return opErr
}
