// Package container runs a bundle's CLI in an OCI container for AIP-17's engine: sandbox: it finds
// a container runtime on the host (podman first, then docker when its engine answers), checks that
// an image is present (it never pulls), and builds the runtime's `run` argv for one call: the
// workspace bind-mounted at its own path, no network, no capabilities, a read-only root, the
// call's limits as the runtime's flags and the call's environment from a file, never from the
// runtime's own environment. It imports nothing of clihost's: host calls it, runner runs the argv.
package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clihost/clihost/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// Runtime is a container runtime found on this host.
type Runtime struct {
	Name string // "podman" or "docker"
	Path string // absolute path of its client
}

// ErrNoRuntime is returned by Find when no usable runtime is on PATH.
var ErrNoRuntime = errors.New("engine: sandbox needs podman or docker; none found on PATH")

// timeoutBackstop is how much longer than the call's timeout podman's own --timeout is.
const timeoutBackstop = 10 * time.Second

// probeTimeout bounds a runtime's answer to `version` or `image exists`.
const probeTimeout = 10 * time.Second

// Find returns the runtime a call should use: podman when lookPath finds it (it needs no daemon),
// else docker when its client is found and its engine answers. env is the runtime's environment
// (Env). The error names what is missing.
func Find(ctx context.Context, lookPath func(string) (string, error), env []string) (Runtime, error) {
	if p, err := lookPath("podman"); err == nil {
		return Runtime{Name: "podman", Path: p}, nil
	}
	p, err := lookPath("docker")
	if err != nil {
		return Runtime{}, ErrNoRuntime
	}
	rt := Runtime{Name: "docker", Path: p}
	if out, err := rt.output(ctx, env, "version", "--format", "{{.Server.Version}}"); err != nil {
		return Runtime{}, fmt.Errorf("engine: sandbox needs podman or docker: podman is not on PATH and docker's engine does not answer (%s)", oneLine(out, err))
	}
	return rt, nil
}

// ImagePresent reports nil when image is in the runtime's local store, else an error naming the
// command that would fetch it (clihost never pulls).
func (rt Runtime) ImagePresent(ctx context.Context, env []string, image string) error {
	if err := ValidImage(image); err != nil {
		return err
	}
	args := []string{"image", "inspect", "--format", "{{.Id}}", "--", image}
	if rt.Name == "podman" {
		args = []string{"image", "exists", "--", image}
	}
	if out, err := rt.output(ctx, env, args...); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			return fmt.Errorf("image %s not present: %s pull %s", image, rt.Name, image)
		}
		return fmt.Errorf("image %s could not be checked with %s: %s", image, rt.Name, oneLine(out, err))
	}
	return nil
}

// imageReference is the grammar of an image reference (the distribution project's): an optional
// registry host (with a port), lowercase path components, an optional tag and an optional digest.
// A transport (containers-storage:, docker-archive:, oci:, dir:, docker://) does not match.
var imageReference = regexp.MustCompile(`^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`)

// ValidImage reports nil when image is an image reference (localhost/jq:1.7, alpine,
// registry:5000/team/tool@sha256:…), else why not: a name with a transport would make the runtime
// read another store or a host path (containers-storage:[vfs@/dir+/run]name creates that store),
// or pull, and a name starting with "-" is an option.
func ValidImage(image string) error {
	if len(image) > 255 || !imageReference.MatchString(image) {
		return fmt.Errorf("image %q is not an image name (a reference such as localhost/jq:1.7 in the runtime's store; no transport such as containers-storage: or docker-archive:)", image)
	}
	return nil
}

// cgroupCheck caches CgroupLimits's answer per runtime client and effective uid: whether a
// runtime is rootless and the host's cgroup version change only with a reboot or another client.
var cgroupCheck sync.Map // key: path + "\x00" + euid → error (nil: limits enforced)

// CgroupLimits reports nil when the runtime enforces memory and process limits (--memory,
// --pids-limit), else why not: a rootless runtime on a cgroup v1 host ignores them (podman says so
// on stderr and runs the container anyway).
func (rt Runtime) CgroupLimits(ctx context.Context, env []string) error {
	key := rt.Path + "\x00" + strconv.Itoa(os.Geteuid())
	if v, ok := cgroupCheck.Load(key); ok {
		err, _ := v.(error)
		return err
	}
	if rt.Name == "podman" {
		// Not `podman info`: it also looks up the packages of conmon and the OCI runtime, and
		// on a Debian host with rpm installed its `rpm -q` creates ~/.rpmdb (a 200 KiB database)
		// in the daemon's HOME (/root, or the state directory of the shipped unit). podman
		// decides both answers as here: cgroup v2 when /sys/fs/cgroup is cgroup2, rootless when
		// not run by root (its client gets none of the variables that would say otherwise, Env).
		var st unix.Statfs_t
		v1 := unix.Statfs("/sys/fs/cgroup", &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC
		var res error
		if v1 && os.Geteuid() != 0 {
			res = fmt.Errorf("rootless %s on a cgroup v1 host ignores memory and process limits", rt.Name)
		}
		cgroupCheck.Store(key, res)
		return res
	}
	format := "{{.CgroupVersion}} {{json .SecurityOptions}}"
	out, err := rt.output(ctx, env, "info", "--format", format)
	if err != nil {
		return fmt.Errorf("%s info: %s", rt.Name, oneLine(out, err)) // not cached: may be transient
	}
	fields := strings.Fields(string(out))
	v1 := len(fields) > 0 && strings.TrimPrefix(fields[0], "v") == "1"
	rootless := strings.Contains(string(out), "true") || strings.Contains(string(out), "rootless")
	var res error
	if v1 && rootless {
		res = fmt.Errorf("rootless %s on a cgroup v1 host ignores memory and process limits", rt.Name)
	}
	cgroupCheck.Store(key, res)
	return res
}

// Remove removes the container name, running or not (after a call that timed out or was
// cancelled: stopping the runtime's client does not stop the container).
func (rt Runtime) Remove(env []string, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	out, err := rt.output(ctx, env, "rm", "--force", "--", name)
	if err != nil && !strings.Contains(string(out), "no such container") && !strings.Contains(strings.ToLower(string(out)), "no container with name") {
		return fmt.Errorf("%s rm %s: %s", rt.Name, name, oneLine(out, err))
	}
	return nil
}

func (rt Runtime) output(ctx context.Context, env []string, args ...string) ([]byte, error) {
	return rt.outputIn(ctx, env, "", args...)
}

// outputIn is output with the client's working directory dir ("": the host's).
func (rt Runtime) outputIn(ctx context.Context, env []string, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rt.Path, args...)
	cmd.Env, cmd.Dir = env, dir
	return cmd.CombinedOutput()
}

func oneLine(out []byte, err error) string {
	s := strings.TrimSpace(string(out))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return err.Error()
	}
	return s
}

// Env is the environment of the runtime's client: PATH, HOME and, for a rootless runtime,
// XDG_RUNTIME_DIR, from lookup; nothing of the call's (that goes in the env file). Variables such
// as DOCKER_HOST or CONTAINERS_CONF a bundle could name would redirect the runtime itself.
func Env(lookup func(string) (string, bool)) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "XDG_RUNTIME_DIR"} {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Limits are one call's resource limits, as the runtime's flags; zero means none.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	NoFile      int64
	FileSize    int64
	CPU         time.Duration
	TmpfsBytes  int64
}

// Spec is one call run in a container.
type Spec struct {
	Name      string // the container's name (unique per call)
	Image     string // present in the runtime's store (ImagePresent)
	Workspace string // absolute; the working directory
	// Mounts are bound in order: the workspace (or an empty directory in its place), the readable
	// and writable roots, protected and masked paths inside it, as the kernel sandbox's plan lists
	// them. Nothing else of the host is visible.
	Mounts   []Mount
	UID, GID int    // the identity the CLI runs as inside
	Groups   []int  // its supplementary groups
	EnvFile  string // a file of KEY=VALUE lines (WriteEnvFile): the CLI's environment but secrets
	// Dir is where Prepare runs the runtime's client: podman's init starts the container's conmon
	// there, which writes a file "oom" in its working directory when the kernel kills the
	// container for memory. A folder of the call's own, removed after it (the env file's); "":
	// the host's working directory, where that file would stay.
	Dir string
	// SecretEnv names variables the runtime copies from its own environment (--env=NAME): the
	// secrets, whose values never go on its command line or into a file.
	SecretEnv []string
	Argv      []string // the program (the entrypoint, looked up on the image's PATH) and its arguments
	Stdin     bool     // keep standard input open (the call has stdin)
	Timeout   time.Duration
	Limits    Limits
}

// Mount is a bind mount of Source at Target (both absolute).
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

func (m Mount) flag() (string, error) {
	for _, p := range []string{m.Source, m.Target} {
		if strings.ContainsAny(p, ",\n") || !strings.HasPrefix(p, "/") {
			return "", fmt.Errorf("path %q cannot be mounted into a container (it must be absolute, without commas)", p)
		}
	}
	f := "--mount=type=bind,source=" + m.Source + ",destination=" + m.Target
	if m.ReadOnly {
		f += ",readonly=true"
	}
	return f, nil
}

// Args returns the arguments of the runtime's `create` for s (Prepare creates and checks the
// container, StartArgs runs it). The program and its arguments follow the image as separate
// arguments (the runtime execs them; there is no shell). It refuses a workspace the runtime's
// --mount syntax cannot carry.
func (rt Runtime) Args(s Spec) ([]string, error) {
	mounts := []string{}
	if strings.ContainsAny(s.Workspace, ",\n") || !strings.HasPrefix(s.Workspace, "/") {
		return nil, fmt.Errorf("workspace %q cannot be a container's working directory (it must be absolute, without commas)", s.Workspace)
	}
	for _, m := range s.Mounts {
		f, err := m.flag()
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, f)
	}
	if err := ValidImage(s.Image); err != nil {
		return nil, err
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" || strings.HasPrefix(s.Argv[0], "[") {
		return nil, errors.New("a container run needs an image and a program")
	}
	a := []string{"create", "--rm", "--name", s.Name, "--pull=never", "--network=none",
		"--cap-drop=all", "--security-opt=no-new-privileges", "--read-only",
		"--user=" + strconv.Itoa(s.UID) + ":" + strconv.Itoa(s.GID),
		"--workdir=" + s.Workspace, "--env-file=" + s.EnvFile}
	for _, name := range s.SecretEnv {
		if name == "" || strings.ContainsAny(name, "=\n\x00") {
			return nil, fmt.Errorf("secret variable %q cannot be passed to a container", name)
		}
		a = append(a, "--env="+name)
	}
	a = append(a, mounts...)
	tmp := "--tmpfs=/tmp:rw,nosuid,nodev"
	if s.Limits.TmpfsBytes > 0 {
		tmp += ",size=" + strconv.FormatInt(s.Limits.TmpfsBytes, 10)
	}
	a = append(a, tmp)
	if rt.Name == "podman" {
		// podman passes the host's proxy variables into containers by default, and mounts its own
		// tmpfs on /tmp, /var/tmp and /run with --read-only.
		a = append(a, "--http-proxy=false", "--read-only-tmpfs=false")
		if os.Geteuid() != 0 {
			// rootless: the daemon's uid is the same uid inside, not a subordinate one, so that
			// the workspace's files keep their owner.
			a = append(a, "--userns=keep-id")
		}
		if s.Timeout > 0 {
			// A backstop for a container whose caller died. The call's own timeout (the
			// runner's) must fire first and report a timeout: podman's, set to the same
			// time, raced it and turned a timed-out call into exit 255.
			t := s.Timeout + timeoutBackstop
			a = append(a, "--timeout="+strconv.FormatInt(int64((t+time.Second-1)/time.Second), 10))
		}
	}
	if s.Stdin {
		a = append(a, "--interactive")
	}
	l := s.Limits
	if l.MemoryBytes > 0 {
		m := strconv.FormatInt(l.MemoryBytes, 10)
		a = append(a, "--memory="+m, "--memory-swap="+m)
	}
	if l.Pids > 0 {
		a = append(a, "--pids-limit="+strconv.FormatInt(l.Pids, 10))
	}
	if l.NoFile > 0 {
		n := strconv.FormatInt(l.NoFile, 10)
		a = append(a, "--ulimit=nofile="+n+":"+n)
	} else if u, ok := ownLimit(unix.RLIMIT_NOFILE); ok {
		a = append(a, "--ulimit=nofile="+u)
	}
	// The runtime raises RLIMIT_NPROC by default, which needs CAP_SYS_RESOURCE where its own
	// limit is lower: the call's pids limit is the cap it passes instead (the kernel counts it
	// per uid, so a busy agent uid may see it first).
	if l.Pids > 0 {
		n := strconv.FormatInt(l.Pids, 10)
		a = append(a, "--ulimit=nproc="+n+":"+n)
	}
	if l.FileSize > 0 {
		n := strconv.FormatInt(l.FileSize, 10)
		a = append(a, "--ulimit=fsize="+n+":"+n)
	}
	if l.CPU > 0 {
		n := strconv.FormatInt(int64((l.CPU+time.Second-1)/time.Second), 10)
		a = append(a, "--ulimit=cpu="+n+":"+n)
	}
	for _, g := range s.Groups {
		a = append(a, "--group-add="+strconv.Itoa(g))
	}
	// The program is the entrypoint, so that an image's own ENTRYPOINT never wraps the call.
	a = append(a, "--entrypoint="+s.Argv[0], "--", s.Image)
	return append(a, s.Argv[1:]...), nil
}

// StartArgs returns the arguments of the runtime's `start` that runs container s.Name (created and
// checked by Prepare) attached to its output, and to its input when s.Stdin.
func (rt Runtime) StartArgs(s Spec) []string {
	a := []string{"start", "--attach"}
	if s.Stdin {
		a = append(a, "--interactive")
	}
	return append(a, "--", s.Name)
}

// Prepare creates the container of s with createArgs (Args), has the runtime make its mounts
// without starting its program (podman init), and checks that each mount shows the file pins
// holds for its source: the runtime follows a symbolic link in a bind mount's source, so a
// workspace folder swapped for a link to a host folder after the policy's check would otherwise
// be mounted. On an error the container may exist: the caller removes it (Remove). docker has no
// init, so it cannot be checked, and is refused.
func (rt Runtime) Prepare(ctx context.Context, env []string, createArgs []string, s Spec, pins *Pins) error {
	if rt.Name != "podman" {
		return fmt.Errorf("%s cannot set up a container's mounts before its program starts, so they cannot be checked; engine: sandbox needs podman", rt.Name)
	}
	if out, err := rt.outputIn(ctx, env, s.Dir, createArgs...); err != nil {
		return fmt.Errorf("%s create: %s", rt.Name, oneLine(out, err))
	}
	if out, err := rt.outputIn(ctx, env, s.Dir, "init", "--", s.Name); err != nil {
		if strings.Contains(string(out), "command that was not found") || strings.Contains(string(out), "executable file not found") {
			return fmt.Errorf("%w: %s", ErrNotInImage, oneLine(out, err))
		}
		return fmt.Errorf("%s init: %s", rt.Name, oneLine(out, err))
	}
	out, err := rt.output(ctx, env, "inspect", "--format", "{{.State.Pid}}", "--", s.Name)
	if err != nil {
		return fmt.Errorf("%s inspect: %s", rt.Name, oneLine(out, err))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%s inspect: no process for container %s (%q)", rt.Name, s.Name, strings.TrimSpace(string(out)))
	}
	return pins.check(pid, s.Mounts)
}

// ErrNotInImage is returned by Prepare when the program is not in the image (or not on its PATH).
var ErrNotInImage = errors.New("the program is not in the image")

// fileKey identifies a file: its device and inode.
type fileKey struct{ dev, ino uint64 }

// Pins holds each mount source open, as it was when PinMounts resolved it, until Close.
type Pins struct {
	keys map[string]fileKey
	fds  []int
}

// PinMounts opens the source of each mount without following any symbolic link on its path (the
// policy's paths are real, so a link there was planted since), and keeps it open so that its inode
// stays the one checked.
func PinMounts(mounts []Mount) (*Pins, error) {
	p := &Pins{keys: map[string]fileKey{}}
	for _, m := range mounts {
		if _, ok := p.keys[m.Source]; ok {
			continue
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, m.Source, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("%s changed since the policy's check (a symbolic link on its path?): %w", m.Source, err)
		}
		p.fds = append(p.fds, fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			p.Close()
			return nil, fmt.Errorf("%s: %w", m.Source, err)
		}
		p.keys[m.Source] = fileKey{dev: st.Dev, ino: st.Ino}
	}
	return p, nil
}

// Close releases the pinned sources.
func (p *Pins) Close() {
	for _, fd := range p.fds {
		unix.Close(fd)
	}
	p.fds = nil
}

// check compares what container process pid sees at each mount's target with the pinned source.
// A bind of a path over itself (the workspace and the policy's paths in it) must be a mount point
// at exactly its target, reached through no symbolic link: the workspace is a live view of the
// host's, so a link planted there while the runtime made the mounts would have carried a mount
// elsewhere, where the link can still lead. A mask (an empty file or folder over a deny path, which
// may itself be a link) is looked up as the runtime did, inside the container's root. A mount
// hidden by a later one at the same place or above it is not looked at.
func (p *Pins) check(pid int, mounts []Mount) error {
	proc := "/proc/" + strconv.Itoa(pid)
	points, err := mountPoints(proc + "/mountinfo")
	if err != nil {
		return err
	}
	root, err := unix.Open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the container's root: %w", err)
	}
	defer unix.Close(root)
	for i, m := range mounts {
		self := m.Source == m.Target
		if self {
			if points[m.Target] == 0 {
				return fmt.Errorf("the container has no mount at %s: a symbolic link on its path carried it elsewhere", m.Target)
			}
			points[m.Target]--
		}
		if hidden(m, mounts[i+1:]) {
			continue
		}
		resolve := uint64(unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS)
		if self {
			resolve |= unix.RESOLVE_NO_SYMLINKS
		}
		if err := p.same(root, m, resolve); err != nil {
			return err
		}
	}
	return nil
}

// same checks that m's target, looked up under root with resolve, is m's pinned source.
func (p *Pins) same(root int, m Mount, resolve uint64) error {
	want, ok := p.keys[m.Source]
	if !ok {
		return fmt.Errorf("%s was not pinned", m.Source)
	}
	fd, err := unix.Openat2(root, strings.TrimPrefix(m.Target, "/"), &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return fmt.Errorf("%s in the container: %w", m.Target, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s in the container: %w", m.Target, err)
	}
	if (fileKey{dev: st.Dev, ino: st.Ino}) != want {
		return fmt.Errorf("the container's %s is not the %s the policy checked: it was swapped (for a symbolic link?) before the runtime mounted it", m.Target, m.Source)
	}
	return nil
}

// mountPoints counts the mount points of a mountinfo file (paths as its process sees them).
func mountPoints(file string) (map[string]int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("the container's mounts: %w", err)
	}
	points := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			points[mountinfo.Unescape(f[4])]++
		}
	}
	return points, nil
}

// hidden reports whether a later mount covers m's target (at it or above it).
func hidden(m Mount, later []Mount) bool {
	for _, l := range later {
		if l.Target == m.Target || strings.HasPrefix(m.Target, l.Target+"/") {
			return true
		}
	}
	return false
}

// ownLimit is this process's limit of resource as soft:hard, when both are finite.
func ownLimit(resource int) (string, bool) {
	var r unix.Rlimit
	if unix.Getrlimit(resource, &r) != nil || r.Cur == unix.RLIM_INFINITY || r.Max == unix.RLIM_INFINITY {
		return "", false
	}
	return strconv.FormatUint(r.Cur, 10) + ":" + strconv.FormatUint(r.Max, 10), true
}

// WriteEnvFile writes env (KEY=VALUE) to a new file only its owner reads in dir, for Spec.EnvFile,
// and returns its path. A value with a newline cannot be written to an env file and is refused.
func WriteEnvFile(dir string, env []string) (string, error) {
	var b strings.Builder
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(kv, "\n\r\x00") {
			return "", fmt.Errorf("environment variable %q cannot be passed to a container (a value with a newline)", k)
		}
		b.WriteString(kv)
		b.WriteByte('\n')
	}
	f, err := os.CreateTemp(dir, "clihost-env-*")
	if err != nil {
		return "", fmt.Errorf("container env file: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("container env file: %w", err)
	}
	return f.Name(), nil
}
