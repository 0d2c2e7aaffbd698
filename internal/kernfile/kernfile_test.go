package kernfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadFileReadsProcfs(t *testing.T) {
	got, err := ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "\nUmask:\t") {
		t.Fatalf("/proc/self/status read as %q", got)
	}
	table, err := ReadFile("/proc/self/mountinfo")
	if err != nil || !bytes.Contains(table, []byte(" / / ")) {
		t.Fatalf("mount table %q, %v", table, err)
	}
}

// TestReadFileReadsPastItsFirstBuffer: a file larger than the first read's buffer is read whole.
func TestReadFileReadsPastItsFirstBuffer(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // 640,000 bytes
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(want))
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(empty); err != nil || len(got) != 0 {
		t.Fatalf("empty file read as %q, %v", got, err)
	}
}

func TestErrorsNameThePathAndWrapErrno(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := ReadFile(missing)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(fmtErr(err), missing) {
		t.Fatalf("ReadFile of a missing file: %v", err)
	}
	if err := WriteFile(missing, "1"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WriteFile created or wrote a missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("WriteFile created the file")
	}
	if _, err := Open(missing, unix.O_RDONLY); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestWriteFileWritesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limit")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, "1073741824"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "1073741824" {
		t.Fatalf("wrote %q", got)
	}
}

// TestOpenGivesABlockingCloseOnExecDescriptor: what Open returns is meant for another process,
// which reads or writes it in blocking mode (a descriptor the runtime's poller held would be
// non-blocking), and it must not leak into programs this process starts.
func TestOpenGivesABlockingCloseOnExecDescriptor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, unix.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	status, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || status&unix.O_NONBLOCK != 0 {
		t.Fatalf("status flags %#x (%v): want a blocking descriptor", status, err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("descriptor flags %#x (%v): want close-on-exec", flags, err)
	}
	if status&unix.O_ACCMODE != unix.O_WRONLY {
		t.Fatalf("opened with access mode %#x, want write-only", status&unix.O_ACCMODE)
	}
}

// TestAppendAtReusesItsBufferAndReadsBesideADirectory: what a caller reads often goes into one
// buffer, and a name is resolved beside a directory descriptor (a thread whose /proc is another's
// reads its own through a descriptor of /proc/<pid>).
func TestAppendAtReusesItsBufferAndReadsBesideADirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte("table"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	buf := make([]byte, 0, 64)
	got, err := AppendAt(append(buf, "prefix:"...), int(d.Fd()), "mountinfo")
	if err != nil || string(got) != "prefix:table" || &got[0] != &buf[:1][0] {
		t.Fatalf("read %q (%v); the buffer was reused: %t", got, err, err == nil && &got[0] == &buf[:1][0])
	}
	if got, err := AppendAt(nil, int(d.Fd()), "mountinfo"); err != nil || string(got) != "table" {
		t.Fatalf("read into no buffer: %q, %v", got, err)
	}
}
