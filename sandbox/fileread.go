package sandbox

import (
	"bytes"
	"errors"
	"io"
	"io/fs"

	"golang.org/x/sys/unix"
)

// pageSize is the unit in which pagedFile reads a file.
const pageSize = 4096

// pagedFile is an io.ReaderAt over an open file that reads each page of it once (pread), on first
// use: a parser's many small reads (an ELF file's headers, one at a time) cost a few system calls.
type pagedFile struct {
	fd    int
	pages map[int64][]byte // a page's offset → its bytes, short at the file's end
}

// openPaged opens the file at p for pagedFile's reads; O_NONBLOCK, so that a FIFO put in a regular
// file's place cannot hold the caller.
func openPaged(p string) (*pagedFile, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return &pagedFile{fd: fd, pages: map[int64][]byte{}}, nil
}

// Close closes the file.
func (f *pagedFile) Close() error { return unix.Close(f.fd) }

// ReadAt is io.ReaderAt's: it returns fewer than len(b) bytes only at the file's end (io.EOF) or
// on an error.
func (f *pagedFile) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("read at a negative offset")
	}
	n := 0
	for n < len(b) {
		pos := off + int64(n)
		base := pos - pos%pageSize
		page, ok := f.pages[base]
		if !ok {
			buf := make([]byte, pageSize)
			m, err := unix.Pread(f.fd, buf, base)
			if err != nil {
				return n, err
			}
			page = buf[:m]
			f.pages[base] = page
		}
		i := int(pos - base)
		if i >= len(page) {
			return n, io.EOF
		}
		n += copy(b[n:], page[i:])
		if n < len(b) && len(page) < pageSize {
			return n, io.EOF
		}
	}
	return n, nil
}

// fileRead is one read a parser made of a file, and what it got.
type fileRead struct {
	off  int64
	want int
	got  []byte
	eof  bool // the read ended at the file's end
}

// recordingReader is an io.ReaderAt that records every read made through it: a parser's answer
// is a function of what it read, so the same reads getting the same bytes later give the same
// answer (sameReads), whatever the file's stamp says.
type recordingReader struct {
	r      io.ReaderAt
	reads  []fileRead
	failed bool // a read failed otherwise than at the file's end
}

// ReadAt is r's ReadAt, recorded.
func (r *recordingReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(b, off)
	if err != nil && err != io.EOF {
		r.failed = true
	}
	r.reads = append(r.reads, fileRead{off: off, want: len(b), got: bytes.Clone(b[:n]), eof: err == io.EOF})
	return n, err
}

// sameReads reports whether the file at p gives each of reads what it gave then.
func sameReads(p string, reads []fileRead) bool {
	f, err := openPaged(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var buf []byte
	for _, r := range reads {
		if cap(buf) < r.want {
			buf = make([]byte, r.want)
		}
		n, err := f.ReadAt(buf[:r.want], r.off)
		if err != nil && err != io.EOF || (err == io.EOF) != r.eof || !bytes.Equal(buf[:n], r.got) {
			return false
		}
	}
	return true
}

// maxPointer is how much of a `.git` file or a commondir file the compiler reads: one line naming
// a git directory.
const maxPointer = 4096

// readPointer returns the first maxPointer bytes of the file p (a `.git` gitfile, a commondir), the
// read recorded in the journal (asked again as an interpreter's header is); false when p cannot be
// read.
func (c *compiler) readPointer(p string) ([]byte, bool) {
	f, err := openPaged(p)
	if err != nil {
		// Asked again, a file that cannot be opened answers no read: the journal keeps none.
		c.fs.asked.markOpaque("a git pointer file that cannot be read")
		return nil, false
	}
	defer f.Close()
	r := &recordingReader{r: f}
	b := make([]byte, maxPointer)
	n, _ := r.ReadAt(b, 0)
	if r.failed {
		c.fs.asked.markOpaque("a git pointer file that cannot be read")
		return nil, false
	}
	c.fs.asked.content(p, r.reads)
	return b[:n], true
}
