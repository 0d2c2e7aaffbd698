package host

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
)

// stderrDrain bounds the wait for the end of a runner.output.file program's stderr once it has
// exited (a descendant that kept the pipe open).
const stderrDrain = 2 * time.Second

// stdoutFile is where a runner.output.file tool's standard output goes: a new file in the folder
// of the path the input names, renamed onto that path only when the call succeeds.
type stdoutFile struct {
	rel      string   // the path as the input gave it (workspace-relative)
	dirfd    int      // the folder, opened without following symbolic links
	tmp, dst string   // names in that folder (tmp "" while the file is unnamed, O_TMPFILE)
	f        *os.File // the new file: the program's stdout itself, no copy in between
	stderr   *boundedBuffer
	errW     *os.File      // the write end of the stderr pipe, the program's stderr
	errR     *os.File      // its read end, closed by close (a descendant may keep errW open)
	drained  chan struct{} // closed once the stderr pipe has been read to its end
}

// openStdoutFile prepares the file for the path rel (an input declared format: path, already
// checked to stay in the workspace) in workspace ws. The folder is walked from the workspace
// without following any symbolic link; the path must be one the call's sandbox may write (pol's
// writable roots, outside its denied and protected paths; with the sandbox off, anywhere in the
// workspace). The output goes to a new file (O_EXCL: never one that exists, a link or another
// user's) given to the uid the program runs as, and only a successful call renames it onto the
// path, which replaces a name, never writes through one.
func openStdoutFile(ws, rel string, pol *sandbox.Policy, plan *isolation.Plan) (*stdoutFile, *Error) {
	clean := filepath.Clean(rel)
	dir, base := filepath.Split(clean)
	if base == "" || base == "." || base == ".." || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, stdoutPathError(rel, "is not a file path in the workspace")
	}
	if pol != nil && !mayWrite(pol, filepath.Join(pol.Workspace(), clean)) {
		return nil, stdoutPathError(rel, "is not in the tool's sandbox.fs.write")
	}
	dirfd, err := openDirBeneath(ws, filepath.Clean(dir))
	if err != nil {
		return nil, stdoutPathError(rel, fmt.Sprintf("has no folder to write in (%v)", err))
	}
	// An unnamed file (O_TMPFILE) that commit links into the folder: a host killed during the call
	// (SIGKILL, a crash) leaves nothing in the workspace. A file system without O_TMPFILE gets a
	// named one, which such a host would leave behind.
	tmp := ""
	fd, err := unix.Openat(dirfd, ".", unix.O_WRONLY|unix.O_TMPFILE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		tmp = stdoutTempName()
		fd, err = unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	}
	if err == nil && os.Geteuid() == 0 && plan != nil {
		err = unix.Fchown(fd, plan.UID, plan.GID)
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
			if tmp != "" {
				_ = unix.Unlinkat(dirfd, tmp, 0)
			}
		}
		unix.Close(dirfd)
		return nil, &Error{Code: errcode.Internal, Message: fmt.Sprintf("the output file for %q: %v", rel, err), Hint: "check the folder's permissions"}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		unix.Close(fd)
		if tmp != "" {
			_ = unix.Unlinkat(dirfd, tmp, 0)
		}
		unix.Close(dirfd)
		return nil, &Error{Code: errcode.Internal, Message: "stderr pipe: " + err.Error()}
	}
	s := &stdoutFile{rel: rel, dirfd: dirfd, tmp: tmp, dst: base, f: os.NewFile(uintptr(fd), ".clihost-stdout"),
		stderr: &boundedBuffer{limit: runner.DefaultLimit}, errW: errW, drained: make(chan struct{})}
	go func() {
		defer close(s.drained)
		_, _ = io.Copy(s.stderr, errR)
		errR.Close()
	}()
	s.errR = errR
	return s, nil
}

// stdoutFileFor prepares the output file of a runner.output.file tool and attaches it to cmd: the
// file is the program's stdout, and its stderr is a pipe the host reads.
// It returns nil for other tools.
func stdoutFileFor(t *manifest.ToolEntry, input map[string]any, ws string, pol *sandbox.Policy, plan *isolation.Plan, cmd *runner.Command) (*stdoutFile, *Error) {
	o := t.Tool.Runner.Output
	if o == nil || o.File == "" {
		return nil, nil
	}
	rel, _ := input[o.File].(string)
	if rel == "" {
		return nil, &Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("input %s names the output file and is missing", o.File),
			Hint: "pass a workspace path such as out/result.txt"}
	}
	if cmd.Stdin != nil || cmd.TTY {
		return nil, &Error{Code: errcode.BundleInvalid, Message: "runner.output.file cannot be combined with stdin or a terminal", Hint: "fix the TOOL.md (clihostctl lint)"}
	}
	f, e := openStdoutFile(ws, rel, pol, plan)
	if e != nil {
		return nil, e
	}
	cmd.Attach = &runner.Attach{Stdout: f.f, Stderr: f.errW}
	return f, nil
}

// redirected is what the call's result is made of once the program has exited: its stderr (read
// to its end, or for at most stderrDrain), and as its stdout the JSON {path, bytes} (parsed as
// JSON whatever the bundle's format).
func (s *stdoutFile) redirected(res runner.Result, conv output.Convention) (runner.Result, output.Convention) {
	s.errW.Close()
	select {
	case <-s.drained:
	case <-time.After(stderrDrain):
	}
	res.Stderr, res.StderrTruncated = s.stderr.bytes()
	var size int64
	if st, err := s.f.Stat(); err == nil {
		size = st.Size()
	}
	res.Stdout, _ = json.Marshal(map[string]any{"path": s.rel, "bytes": size})
	res.StdoutTruncated = false
	conv.Format, conv.Empty, conv.Stream = output.FormatJSON, "", "stdout"
	return res, conv
}

// stdoutTempName is a new name for the output file in its folder until it is renamed onto its path.
func stdoutTempName() string {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return ".clihost-stdout-" + hex.EncodeToString(rnd[:])
}

// commit renames the file onto its path (an unnamed one is first linked into its folder under a
// temporary name: linkat cannot replace a name).
func (s *stdoutFile) commit() error {
	if s.tmp == "" {
		tmp := stdoutTempName()
		err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(s.f.Fd())), s.dirfd, tmp, unix.AT_SYMLINK_FOLLOW)
		if err != nil {
			return fmt.Errorf("link the output file into its folder: %w", err)
		}
		s.tmp = tmp
	}
	if err := s.f.Close(); err != nil {
		return err
	}
	return unix.Renameat(s.dirfd, s.tmp, s.dirfd, s.dst)
}

// close removes the file unless committed, and releases the folder and the pipe.
func (s *stdoutFile) close() {
	s.errW.Close()
	s.errR.Close() // ends the reader if a descendant still holds the pipe
	s.f.Close()
	if s.tmp != "" {
		_ = unix.Unlinkat(s.dirfd, s.tmp, 0) // ENOENT once committed
	}
	unix.Close(s.dirfd)
}

func stdoutPathError(rel, why string) *Error {
	return &Error{Code: errcode.PathDenied, Message: fmt.Sprintf("the output file %q %s", rel, why),
		Hint: "name a file in a folder the tool may write (its sandbox.fs.write, e.g. out/result.mp4)"}
}

// mayWrite reports whether the sandbox pol lets its program write abs: inside a writable root,
// outside every denied and protected path.
func mayWrite(pol *sandbox.Policy, abs string) bool {
	in := func(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	for _, list := range [][]string{pol.Deny, pol.Protect} {
		for _, d := range list {
			if in(abs, d) {
				return false
			}
		}
	}
	for _, w := range pol.Writable {
		if in(abs, w) {
			return true
		}
	}
	return false
}

// openDirBeneath opens the folder rel of ws, one component at a time, following no symbolic link.
func openDirBeneath(ws, rel string) (int, error) {
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if rel == "." || rel == "" {
		return fd, nil
	}
	for _, name := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ELOOP) {
				return -1, fmt.Errorf("%s is a symbolic link", name)
			}
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// boundedBuffer keeps the first limit bytes written to it and drops the rest, never failing.
type boundedBuffer struct {
	mu        sync.Mutex
	b         []byte
	limit     int
	truncated bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.limit - len(b.b); room < n {
		b.truncated = true
		p = p[:max(room, 0)]
	}
	b.b = append(b.b, p...)
	return n, nil
}

func (b *boundedBuffer) bytes() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b, b.truncated
}
