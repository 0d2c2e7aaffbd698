// Command probe is the escape corpus's stand-in for a hostile CLI. Run inside clihost's sandbox as
// a bundle's bin, it performs exactly one escape attempt, named by its first argument, and prints
// one JSON line describing what the kernel answered:
//
//	{"case":"read","result":"denied","step":"open","errno":"EACCES","detail":"..."}
//
// result is "allowed" when the attempt got through and "denied" when it did not; step names the
// call that produced the result, errno its error (for a failed syscall) and signal the signal that
// killed a child (the attempts that must kill the process run in a child, so that the probe can
// still report). The probe exits 0 whatever happened, so that the host reports the call as OK and
// the test reads the report from the envelope's value. "probe --version" prints "probe 1.0.0", for
// the bundle's version check.
//
// Arguments starting with "$HOME" have it replaced by the HOME the sandbox gives the probe.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// version is what --version prints after "probe ".
const version = "1.0.0"

// report is the probe's one line of output.
type report struct {
	Case   string `json:"case"`
	Result string `json:"result"` // "allowed" or "denied"
	Step   string `json:"step,omitempty"`
	Errno  string `json:"errno,omitempty"`
	Signal string `json:"signal,omitempty"`
	Exit   *int   `json:"exit,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// attempt performs one escape attempt with its arguments.
type attempt func(args []string) report

// cases are the attempts by name; see each function's comment.
var cases = map[string]attempt{
	// Filesystem.
	"read":         readFile,
	"list":         listDir,
	"write":        writeFile,
	"mkdir":        mkdir,
	"symlink-read": symlinkRead,
	"link":         hardlink,
	"rename":       rename,
	"chmod":        chmod,
	"utime":        utime,
	"setxattr":     setxattr,
	"mount":        mountOver,
	"umount":       umount,
	"open-tree":    openTree,
	"plant":        plant,
	"scratch":      scratch,
	"walk":         walk,
	"copy-tree":    copyTree,
	"btrfs-swap":   btrfsSwap,
	"git-init":     gitInit,
	"git-clone":    gitClone,
	// Exec.
	"exec":              run,
	"drop-exec":         dropExec(false),
	"drop-ldso":         dropExec(true),
	"memfd-create-exec": memfdCreateExec,
	"memfd-execveat":    memfdExecveat,
	"memfd-fexecve":     memfdFexecve,
	"escaped":           escaped,
	"int80":             foreignABI("int80-child"),
	"x32":               foreignABI("x32-child"),
	"int80-child":       int80Child,
	"x32-child":         x32Child,
	// Environment.
	"env": env,
	// Network.
	"tcp":    dialTCP,
	"udp":    sendUDP,
	"socket": socket,
	"dns":    resolve,
	"unix":   dialUnix,
	// The egress audit under a flood.
	"dns-flood": dnsFlood,
	// Processes and kernel interfaces.
	"ptrace":  ptraceAttach,
	"kill":    kill,
	"unshare": unshare,
	"setns":   setns,
	"syscall": rawSyscall,
	"tiocsti": tiocsti,
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("probe " + version)
		return
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe CASE [ARG...]")
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	for i, a := range args {
		if rest, ok := strings.CutPrefix(a, "$HOME"); ok {
			args[i] = os.Getenv("HOME") + rest
		}
	}
	var r report
	if f, ok := cases[name]; ok {
		r = f(args)
	} else {
		r = report{Result: "denied", Step: "probe", Detail: "unknown case " + strconv.Quote(name)}
	}
	if r.Case == "" {
		r.Case = name
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

// result turns the outcome of step into a report: allowed when err is nil, else denied with the
// errno err carries (if any) and its text.
func result(step string, err error) report {
	if err == nil {
		return report{Result: "allowed", Step: step}
	}
	r := report{Result: "denied", Step: step, Detail: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		r.Errno = unix.ErrnoName(errno)
	}
	return r
}

// errnoErr is the error of a raw syscall: nil for a zero errno.
func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// need reports a usage error unless args has n entries.
func need(args []string, n int) *report {
	if len(args) != n {
		return &report{Result: "denied", Step: "probe", Detail: fmt.Sprintf("want %d arguments, got %q", n, args)}
	}
	return nil
}

// clip shortens s for a report.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// readFile PATH opens PATH for reading and reads it; allowed reports the content.
func readFile(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	f, err := os.Open(args[0])
	if err != nil {
		return result("open", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	r := result("read", err)
	if err == nil {
		r.Detail = clip(string(data))
	}
	return r
}

// listDir DIR lists DIR; allowed reports the names.
func listDir(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	entries, err := os.ReadDir(args[0])
	r := result("readdir", err)
	if err == nil {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		r.Detail = strings.Join(names, ",")
	}
	return r
}

// writeFile PATH creates (or truncates) PATH and writes to it.
func writeFile(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return result("open", err)
	}
	_, err = f.WriteString("written by the escape probe\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return result("write", err)
}

// scratch DIR NAME makes the round trip of a program's scratch files in DIR: it creates the
// directory DIR/NAME, writes a file in it, reads it back, renames and removes it, removes the
// directory, then writes and removes the file DIR/NAME.file. Allowed means every step succeeded.
func scratch(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	dir := filepath.Join(args[0], args[1])
	file, moved, top := filepath.Join(dir, "f"), filepath.Join(dir, "g"), dir+".file"
	steps := []struct {
		name string
		do   func() error
	}{
		{"mkdir", func() error { return os.Mkdir(dir, 0o700) }},
		{"write", func() error { return os.WriteFile(file, []byte("scratch\n"), 0o600) }},
		{"read", func() error {
			data, err := os.ReadFile(file)
			if err == nil && string(data) != "scratch\n" {
				err = fmt.Errorf("read back %q", data)
			}
			return err
		}},
		{"rename", func() error { return os.Rename(file, moved) }},
		{"remove", func() error { return os.Remove(moved) }},
		{"rmdir", func() error { return os.Remove(dir) }},
		{"write-top", func() error { return os.WriteFile(top, []byte("scratch\n"), 0o600) }},
		{"remove-top", func() error { return os.Remove(top) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return result(s.name, err)
		}
	}
	return report{Result: "allowed", Step: "remove-top"}
}

// mkdir DIR creates DIR.
func mkdir(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	return result("mkdir", os.Mkdir(args[0], 0o755))
}

// symlinkRead TARGET LINK creates the symbolic link LINK → TARGET (unless LINK already exists) and
// reads the file through it.
func symlinkRead(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	if _, err := os.Lstat(args[1]); err != nil {
		if err := os.Symlink(args[0], args[1]); err != nil {
			return result("symlink", err)
		}
	}
	return readFile(args[1:])
}

// hardlink OLD NEW creates the hard link NEW to OLD with link(2), then reads the file through it.
func hardlink(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	if err := unix.Link(args[0], args[1]); err != nil {
		return result("link", err)
	}
	return readFile(args[1:])
}

// rename OLD NEW renames OLD to NEW.
func rename(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	return result("rename", unix.Rename(args[0], args[1]))
}

// chmod PATH makes PATH world-writable.
func chmod(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	return result("chmod", unix.Chmod(args[0], 0o777))
}

// utime PATH sets PATH's access and modification times to the epoch.
func utime(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	return result("utimensat", unix.UtimesNano(args[0], []unix.Timespec{{}, {}}))
}

// setxattr PATH sets the extended attribute user.clihost_escape on PATH.
func setxattr(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	return result("setxattr", unix.Setxattr(args[0], "user.clihost_escape", []byte("1"), 0))
}

// mountOver PATH mounts a tmpfs over PATH (which would hide a mask, or replace a read-only tree
// with a writable one).
func mountOver(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	return result("mount", unix.Mount("tmpfs", args[0], "tmpfs", 0, ""))
}

// umount PATH detaches the mount at PATH (a deny mask, to reveal what it covers).
func umount(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	return result("umount2", unix.Unmount(args[0], unix.MNT_DETACH))
}

// openTree PATH clones the mount at PATH with open_tree(2), the new mount API's way to move a mask.
func openTree(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, args[0], unix.OPEN_TREE_CLONE|unix.O_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	return result("open_tree", err)
}

// plant FILE creates FILE and the directories leading to it (as a tool's own "mkdir -p" would),
// writing a small shell script: a file such as .git/hooks/pre-commit or .vscode/tasks.json that
// the user's own tools run later, outside the sandbox.
func plant(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	if err := os.MkdirAll(filepath.Dir(args[0]), 0o755); err != nil {
		return result("mkdir", err)
	}
	return result("write", os.WriteFile(args[0], []byte("#!/bin/sh\necho pwned\n"), 0o755))
}

// copyTree SRC DST copies the tree SRC into DST as a tool with a write grant would write it:
// directories made, files written (overwriting, with SRC's permission bits), symbolic links made
// with SRC's targets. allowed lists what was written.
func copyTree(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	var wrote []string
	err := filepath.WalkDir(args[0], func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(args[0], p)
		dst := filepath.Join(args[1], rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			return nil
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
				return err
			}
			if err := os.Chmod(dst, info.Mode().Perm()); err != nil {
				return err
			}
		}
		wrote = append(wrote, rel)
		return nil
	})
	r := result("copy", err)
	if err == nil {
		r.Detail = strings.Join(wrote, ",")
	}
	return r
}

// gitInit DIR runs the real git to make DIR a repository on branch main with one empty commit,
// as a legitimate tool would (the git case of the escape corpus' positive controls).
func gitInit(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	if r := run([]string{"/usr/bin/git", "init", "-q", "-b", "main", args[0]}); r.Result != "allowed" {
		return r
	}
	return run([]string{"/usr/bin/git", "-C", args[0], "-c", "user.name=agent", "-c", "user.email=agent@example.com",
		"commit", "-q", "--allow-empty", "-m", "made in the sandbox"})
}

// gitClone SRC DST runs the real git to clone the local repository SRC into DST.
func gitClone(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	return run([]string{"/usr/bin/git", "clone", "-q", args[0], args[1]})
}

// run PATH [ARG...] runs PATH with os/exec. allowed means it started and exited 0 (detail: its
// output); denied is either a failed start (errno) or its exit status (exit, or signal) with its
// output.
func run(args []string) report {
	if len(args) == 0 {
		return report{Result: "denied", Step: "probe", Detail: "exec needs a path"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = os.Environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return result("execve", err)
	}
	err := cmd.Wait()
	r := report{Result: "allowed", Step: "wait", Detail: clip(out.String())}
	if err != nil {
		r.Result = "denied"
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = unix.SignalName(ws.Signal())
		} else {
			code := cmd.ProcessState.ExitCode()
			r.Exit = &code
		}
	}
	return r
}

// walkers are the tree walkers of the walk case, by name: the program and its arguments before the
// tree to walk.
var walkers = map[string][]string{
	"rg":       {"rg", "--no-config", "-n", "needle"},
	"rg-files": {"rg", "--no-config", "--files", "--hidden", "--no-ignore"},
	"grep":     {"grep", "-r", "needle"},
	"find":     {"find"},
	"git":      {"git", "status", "--porcelain", "--untracked-files=all"},
}

// walk WALKER TREE runs the tree walker WALKER (see walkers) over TREE (for git: in TREE), found on
// PATH (else in /usr/bin), and reports its exit status and its whole output (up to 64 KiB; find leaves out .git).
func walk(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	argv, ok := walkers[args[0]]
	if !ok {
		return report{Result: "denied", Step: "probe", Detail: "unknown walker " + strconv.Quote(args[0])}
	}
	argv = append(slices.Clone(argv), args[1])
	switch args[0] {
	case "git":
		argv = argv[:len(argv)-1]
	case "find":
		argv = append(argv, "-name", ".git", "-prune", "-o", "-print")
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		argv[0] = "/usr/bin/" + argv[0] // unsandboxed, the probe may get no PATH
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = args[1]
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	detail := out.String()
	if len(detail) > 64<<10 {
		detail = detail[:64<<10]
	}
	r := report{Result: "allowed", Step: "wait", Detail: detail}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code := exitErr.ExitCode()
		r.Result, r.Exit = "denied", &code
	case err != nil:
		return result("start", err)
	}
	return r
}

// ldso is the x86-64 ELF interpreter, the loader of drop-ldso.
const ldso = "/lib64/ld-linux-x86-64.so.2"

// dropExec returns the attempt "SRC DST [ARG...]": copy the readable program SRC to the writable
// place DST (mode 0755) and run it, directly or, with viaLoader, as "ld.so DST ARG...", which maps
// it without execve's checks.
func dropExec(viaLoader bool) attempt {
	return func(args []string) report {
		if len(args) < 2 {
			return report{Result: "denied", Step: "probe", Detail: "want SRC DST [ARG...]"}
		}
		data, err := os.ReadFile(args[0])
		if err != nil {
			return result("read source", err)
		}
		if err := os.WriteFile(args[1], data, 0o755); err != nil {
			return result("write copy", err)
		}
		argv := args[1:]
		if viaLoader {
			argv = append([]string{ldso}, argv...)
		}
		return run(argv)
	}
}

// memfdCreateExec asks for an executable memfd (MFD_EXEC).
func memfdCreateExec([]string) report {
	fd, err := unix.MemfdCreate("probe", unix.MFD_CLOEXEC|unix.MFD_EXEC)
	if err == nil {
		unix.Close(fd)
	}
	return result("memfd_create", err)
}

// selfMemfd copies the probe's own binary into a new memfd (created with default flags, as a
// program that does not ask for MFD_EXEC would).
func selfMemfd() (int, *report) {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		r := result("read /proc/self/exe", err)
		return -1, &r
	}
	fd, err := unix.MemfdCreate("probe", 0)
	if err != nil {
		r := result("memfd_create", err)
		return -1, &r
	}
	if _, err := unix.Write(fd, self); err != nil {
		unix.Close(fd)
		r := result("write memfd", err)
		return -1, &r
	}
	return fd, nil
}

// memfdExecveat copies the probe into a memfd and executes it with execveat(fd, "", AT_EMPTY_PATH).
// If that works, the new image runs "escaped", which reports "allowed" for this case.
func memfdExecveat([]string) report {
	fd, r := selfMemfd()
	if r != nil {
		return *r
	}
	argv := []string{"probe", "escaped", "memfd-execveat"}
	argvp, _ := syscall.SlicePtrFromStrings(argv)
	envp, _ := syscall.SlicePtrFromStrings(os.Environ())
	empty, _ := unix.BytePtrFromString("")
	_, _, e := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
	return result("execveat", errnoErr(e))
}

// memfdFexecve copies the probe into a memfd and executes /proc/self/fd/N, as glibc's fexecve does
// without execveat. If that works, the new image reports "allowed".
func memfdFexecve([]string) report {
	fd, r := selfMemfd()
	if r != nil {
		return *r
	}
	err := syscall.Exec("/proc/self/fd/"+strconv.Itoa(fd), []string{"probe", "escaped", "memfd-fexecve"}, os.Environ())
	return result("execve", err)
}

// escaped [CASE] runs when an exec that should have failed worked (from a memfd, or a copy
// in a writable place): the escape got through. It reports as CASE, the attempt that exec'd it.
func escaped(args []string) report {
	r := report{Result: "allowed", Step: "exec", Detail: "the probe ran from a memfd or a dropped copy"}
	if len(args) > 0 {
		r.Case = args[0]
	}
	return r
}

// foreignABI returns the attempt that runs the probe's own binary again as child, which makes a
// syscall through a foreign ABI; the seccomp filter must kill it (SIGSYS).
func foreignABI(child string) attempt {
	return func([]string) report {
		self, err := os.Executable()
		if err != nil {
			return result("executable", err)
		}
		r := run([]string{self, child})
		r.Step = child
		return r
	}
}

// x32Child makes getpid through the x32 ABI (the syscall number with bit 30 set). If the process
// survives, it reports what the syscall returned.
func x32Child([]string) report {
	const x32Bit = 0x40000000
	pid, _, e := unix.RawSyscall(unix.SYS_GETPID|x32Bit, 0, 0, 0)
	return report{Result: "allowed", Step: "x32 getpid", Detail: fmt.Sprintf("returned %d, errno %d", pid, e)}
}

// env NAME reports whether NAME is in the probe's environment (allowed, detail: its value).
func env(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	v, ok := os.LookupEnv(args[0])
	if !ok {
		return report{Result: "denied", Step: "getenv", Detail: args[0] + " is not set"}
	}
	return report{Result: "allowed", Step: "getenv", Detail: v}
}

// dialTCP HOST:PORT connects to HOST:PORT over TCP; allowed reports the first line the server sent
// after an HTTP request.
func dialTCP(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	c, err := net.DialTimeout("tcp", args[0], 3*time.Second)
	if err != nil {
		return result("connect", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", args[0])
	line := make([]byte, 64)
	n, _ := c.Read(line)
	return report{Result: "allowed", Step: "connect", Detail: clip(string(line[:n]))}
}

// sendUDP HOST:PORT sends one datagram to HOST:PORT.
func sendUDP(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	c, err := net.Dial("udp", args[0])
	if err != nil {
		return result("connect", err)
	}
	defer c.Close()
	_, err = c.Write([]byte("escape probe"))
	return result("send", err)
}

// socketKinds are the sockets the "socket" case can ask for.
var socketKinds = map[string][3]int{
	"mptcp":  {unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP},
	"mptcp6": {unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_MPTCP},
	"raw":    {unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP},
	"packet": {unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))},
	"vsock":  {unix.AF_VSOCK, unix.SOCK_STREAM, 0},
	"audit":  {unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT},
	"tcp":    {unix.AF_INET, unix.SOCK_STREAM, 0},
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// socket KIND creates a socket of KIND (see socketKinds).
func socket(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	k, ok := socketKinds[args[0]]
	if !ok {
		return report{Result: "denied", Step: "probe", Detail: "unknown socket kind " + args[0]}
	}
	fd, err := unix.Socket(k[0], k[1]|unix.SOCK_CLOEXEC, k[2])
	if err == nil {
		unix.Close(fd)
	}
	return result("socket", err)
}

// resolve NAME resolves NAME with Go's own resolver (the probe is built without cgo).
func resolve(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, args[0])
	r := result("lookup", err)
	if err == nil {
		r.Detail = strings.Join(addrs, ",")
	}
	// The resolver keeps only the text of the error that ended the lookup: name its errno.
	var dnsErr *net.DNSError
	if r.Errno == "" && errors.As(err, &dnsErr) {
		for _, e := range []syscall.Errno{unix.ECONNREFUSED, unix.ENETUNREACH, unix.EACCES, unix.EPERM, unix.EHOSTUNREACH} {
			if strings.HasSuffix(dnsErr.Err, e.Error()) {
				r.Errno = unix.ErrnoName(e)
			}
		}
	}
	return r
}

// dialUnix PATH connects to the unix socket PATH ("@name": an abstract socket) and reads what the
// server sends first.
func dialUnix(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	c, err := net.DialTimeout("unix", args[0], 3*time.Second)
	if err != nil {
		return result("connect", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line := make([]byte, 64)
	n, _ := c.Read(line)
	return report{Result: "allowed", Step: "connect", Detail: clip(string(line[:n]))}
}

// pidArg parses a pid argument; "parent" is the probe's parent.
func pidArg(s string) (int, error) {
	if s == "parent" {
		return os.Getppid(), nil
	}
	return strconv.Atoi(s)
}

// ptraceAttach PID attaches to PID ("parent": the probe's parent) with PTRACE_ATTACH.
func ptraceAttach(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	pid, err := pidArg(args[0])
	if err != nil {
		return result("probe", err)
	}
	err = unix.PtraceAttach(pid)
	if err == nil {
		_ = unix.PtraceDetach(pid)
	}
	r := result("ptrace", err)
	r.Detail = strings.TrimSpace(fmt.Sprintf("pid %d %s", pid, r.Detail))
	return r
}

// kill PID SIGNAL sends SIGNAL (a number) to PID, then checks that the probe's parent is still
// there (detail).
func kill(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	pid, err := pidArg(args[0])
	if err != nil {
		return result("probe", err)
	}
	sig, err := strconv.Atoi(args[1])
	if err != nil {
		return result("probe", err)
	}
	r := result("kill", unix.Kill(pid, syscall.Signal(sig)))
	time.Sleep(50 * time.Millisecond)
	r.Detail = strings.TrimSpace(fmt.Sprintf("pid %d, parent %d afterwards; %s", pid, os.Getppid(), r.Detail))
	return r
}

// namespaceFlags are the namespaces the "unshare" case can ask for.
var namespaceFlags = map[string]int{
	"user": unix.CLONE_NEWUSER, "mount": unix.CLONE_NEWNS, "net": unix.CLONE_NEWNET, "pid": unix.CLONE_NEWPID,
}

// unshare NS creates a new namespace of kind NS (see namespaceFlags), the first step to undoing
// the masks from a namespace where the probe has capabilities.
func unshare(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	flag, ok := namespaceFlags[args[0]]
	if !ok {
		return report{Result: "denied", Step: "probe", Detail: "unknown namespace " + args[0]}
	}
	return result("unshare", unix.Unshare(flag))
}

// setns NSFILE opens the namespace file NSFILE and joins that namespace with setns(2).
func setns(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	fd, err := unix.Open(args[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result("open", err)
	}
	defer unix.Close(fd)
	return result("setns", unix.Setns(fd, 0))
}

// rawSyscall NAME makes the syscall NAME with arguments that make it fail harmlessly (EFAULT,
// EINVAL) or succeed without effect when no filter stands in the way, so an EPERM is the filter's.
func rawSyscall(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	var r1 uintptr
	var e syscall.Errno
	closes := false
	switch args[0] {
	case "io_uring_setup": // NULL params: EFAULT
		r1, _, e = unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
		closes = true
	case "bpf": // BPF_MAP_CREATE with NULL attr
		r1, _, e = unix.RawSyscall(unix.SYS_BPF, 0, 0, 0)
		closes = true
	case "perf_event_open": // NULL attr: EFAULT
		r1, _, e = unix.RawSyscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0)
		closes = true
	case "userfaultfd": // UFFD_USER_MODE_ONLY: allowed to unprivileged users
		r1, _, e = unix.RawSyscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|1, 0, 0)
		closes = true
	case "keyctl": // KEYCTL_GET_KEYRING_ID of the session keyring
		r1, _, e = unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, negative(unix.KEY_SPEC_SESSION_KEYRING), 0)
	case "add_key": // NULL type: EFAULT
		r1, _, e = unix.RawSyscall6(unix.SYS_ADD_KEY, 0, 0, 0, 0, negative(unix.KEY_SPEC_SESSION_KEYRING), 0)
	case "clone3": // size 0: EINVAL
		r1, _, e = unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
	case "process_vm_readv": // pid 1, no iovecs
		r1, _, e = unix.RawSyscall6(unix.SYS_PROCESS_VM_READV, 1, 0, 0, 0, 0, 0)
	case "pidfd_getfd": // fd -1: EBADF
		r1, _, e = unix.RawSyscall(unix.SYS_PIDFD_GETFD, ^uintptr(0), 0, 0)
	case "open_by_handle_at": // NULL handle: EFAULT
		r1, _, e = unix.RawSyscall(unix.SYS_OPEN_BY_HANDLE_AT, negative(unix.AT_FDCWD), 0, 0)
		closes = true
	case "pivot_root": // "." onto ".": EINVAL/EBUSY at worst
		dot, _ := unix.BytePtrFromString(".")
		r1, _, e = unix.RawSyscall(unix.SYS_PIVOT_ROOT, uintptr(unsafe.Pointer(dot)), uintptr(unsafe.Pointer(dot)), 0)
	case "fsopen":
		name, _ := unix.BytePtrFromString("tmpfs")
		r1, _, e = unix.RawSyscall(unix.SYS_FSOPEN, uintptr(unsafe.Pointer(name)), unix.FSOPEN_CLOEXEC, 0)
		closes = true
	case "personality": // PER_LINUX32 would change the process's ABI personality
		r1, _, e = unix.RawSyscall(unix.SYS_PERSONALITY, 0x0008, 0, 0)
		if e == 0 {
			unix.RawSyscall(unix.SYS_PERSONALITY, 0, 0, 0)
		}
	case "iopl":
		r1, _, e = unix.RawSyscall(unix.SYS_IOPL, 3, 0, 0)
	default:
		return report{Result: "denied", Step: "probe", Detail: "unknown syscall " + args[0]}
	}
	if e == 0 && closes {
		unix.Close(int(r1))
	}
	r := result(args[0], errnoErr(e))
	if e == 0 {
		r.Detail = fmt.Sprintf("returned %d", r1)
	}
	return r
}

// tiocsti TTY pushes a character into the input of TTY ("stdin": fd 0, else a path such as
// /dev/tty) with the TIOCSTI ioctl, the keystroke-injection escape.
func tiocsti(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	fd := 0
	if args[0] != "stdin" {
		var err error
		if fd, err = unix.Open(args[0], unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err != nil {
			return result("open", err)
		}
		defer unix.Close(fd)
	}
	c := byte('#')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	return result("ioctl TIOCSTI", errnoErr(e))
}

// negative passes a negative int constant (a special keyring or AT_FDCWD) as a syscall argument.
func negative(v int) uintptr { return uintptr(v) }
