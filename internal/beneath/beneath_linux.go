package beneath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	_ fs.StatFS = (*FS)(nil)
	_ fs.SubFS  = (*FS)(nil)
)

// FS is the tree beneath a directory, opened once (an O_PATH descriptor): every Open, Stat and Sub
// resolves its path relative to that descriptor with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS),
// so symbolic links are followed only while they stay beneath it. Where the kernel has no openat2
// (Linux < 5.6, or a seccomp filter that refuses it), each component is opened with O_NOFOLLOW
// instead: no symbolic link is followed at all. Only regular files and directories are opened.
// It is safe for concurrent use; the descriptor is closed when the FS is garbage.
type FS struct {
	dir  *os.File // O_PATH|O_DIRECTORY
	root string   // the directory's path, for names and errors
}

// Open opens dir (following symbolic links in dir itself: it is the caller's choice) and returns
// the FS beneath it.
func Open(dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return &FS{dir: os.NewFile(uintptr(fd), abs), root: abs}, nil
}

// haveOpenat2 probes the kernel once; a test may turn it off.
var haveOpenat2 = sync.OnceValue(func() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH})
	if err == nil {
		_ = unix.Close(fd)
	}
	return !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM)
})

// openat opens name (a valid fs path) beneath the directory with flags, returning the descriptor.
func (f *FS) openat(op, name string, flags int) (int, error) {
	if !fs.ValidPath(name) {
		return -1, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	defer runtime.KeepAlive(f.dir)
	flags |= unix.O_CLOEXEC
	var fd int
	var err error
	if haveOpenat2() {
		for {
			fd, err = unix.Openat2(int(f.dir.Fd()), name, &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) { // EAGAIN: a rename raced the lookup
				break
			}
		}
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
			err = fmt.Errorf("%w (%w)", ErrOutside, err)
		}
	} else {
		fd, err = f.walk(name, flags)
	}
	if err != nil {
		return -1, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return fd, nil
}

// walk opens name one component at a time, none of them followed when it is a symbolic link.
func (f *FS) walk(name string, flags int) (int, error) {
	cur := int(f.dir.Fd())
	parts := strings.Split(name, "/")
	for i, p := range parts {
		fl := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			fl = flags | unix.O_NOFOLLOW
		}
		fd, err := unix.Openat(cur, p, fl, 0)
		if err == nil && fl&unix.O_PATH != 0 && isLinkFd(fd) { // O_PATH|O_NOFOLLOW opens the link itself
			_ = unix.Close(fd)
			err = unix.ELOOP
		}
		link := errors.Is(err, unix.ELOOP) || (errors.Is(err, unix.ENOTDIR) && isLink(cur, p))
		if cur != int(f.dir.Fd()) {
			_ = unix.Close(cur)
		}
		if link {
			return -1, fmt.Errorf("%w: %s is a symbolic link, and this kernel has no openat2 to follow it safely", ErrOutside, strings.Join(parts[:i+1], "/"))
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// isLink tells whether name in directory dirfd is a symbolic link (for the message only: the
// O_NOFOLLOW open is what refuses it).
func isLink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// isLinkFd tells whether the descriptor is a symbolic link (an O_PATH|O_NOFOLLOW open of one).
func isLinkFd(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// Open opens name for reading. A FIFO, socket or device is refused (ErrNotFile) without waiting
// for a writer.
func (f *FS) Open(name string) (fs.File, error) {
	fd, err := f.openat("open", name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if m := st.Mode & unix.S_IFMT; m != unix.S_IFREG && m != unix.S_IFDIR {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrNotFile}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	// The absolute name: os's directory entries look their details up by it (lstat, which follows
	// no link and reads no content).
	return os.NewFile(uintptr(fd), filepath.Join(f.root, filepath.FromSlash(name))), nil
}

// Stat describes name (following symbolic links beneath the directory), without opening it for
// reading.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	fd, err := f.openat("stat", name, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	file := os.NewFile(uintptr(fd), filepath.Join(f.root, filepath.FromSlash(name)))
	defer file.Close()
	return file.Stat()
}

// Sub is the FS beneath the directory dir inside this one, with a descriptor of its own: what it
// opens is confined to dir.
func (f *FS) Sub(dir string) (fs.FS, error) {
	if dir == "." {
		return f, nil
	}
	fd, err := f.openat("sub", dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(f.root, filepath.FromSlash(dir))
	return &FS{dir: os.NewFile(uintptr(fd), root), root: root}, nil
}

// Root is the directory's path, as opened.
func (f *FS) Root() string { return f.root }

// Executable finds the file rel (a slash path relative to dir, as a manifest writes it) beneath
// dir, following symbolic links only while they stay beneath it (as Open does), and returns its
// path with every symbolic link resolved, as the kernel found it, when it is an executable regular
// file. A path that leads out of dir is an error wrapping ErrOutside.
func Executable(dir, rel string) (string, error) {
	f, err := Open(dir)
	if err != nil {
		return "", err
	}
	defer f.dir.Close()
	name := path.Clean(rel)
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "open", Path: rel, Err: ErrOutside}
	}
	fd, err := f.openat("open", name, unix.O_PATH)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		return "", &fs.PathError{Op: "open", Path: rel, Err: errors.New("not an executable regular file")}
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	return real, nil
}
