package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/egress/addr"

	"golang.org/x/sys/unix"
)

// cgroupLimits reports whether l has a limit a control group enforces.
func cgroupLimits(l isolation.Limits) bool { return l.MemoryBytes > 0 || l.Pids > 0 || l.CPU > 0 }

// UseEgress gives the plan the host's egress (Egress set, NoNetwork cleared) and adds the proxy
// variables (addr.ProxyEnv) to a copy of Env, after the others, so that they win.
func UseEgress(p *isolation.Plan) {
	p.Egress, p.NoNetwork = true, false
	p.Env = append(slices.Clone(p.Env), addr.ProxyEnv()...)
}

// envelope is what is written to the plan pipe: the plan plus what the host decided about it.
type envelope struct {
	// Protocol is planProtocol of the host that wrote it: a helper executable from another build
	// refuses a plan it may not understand rather than enforce it partly.
	Protocol int
	Plan     isolation.Plan
	// UserNS is set when the host is not root: the sandbox then has its own user namespace, in
	// which the program keeps uid 0 (mapped to the host user) and only loses its capabilities.
	UserNS bool
	// Deadline is the CLOCK_BOOTTIME instant (nanoseconds) Plan.Timeout after Command, at which the
	// init ends the sandbox; 0 for none.
	Deadline int64
	// CgroupFDs are the init's descriptors of the tasks files of its call's cgroup v1 groups,
	// opened by the host: the thread that forks the program joins them, by writing "0" to each.
	CgroupFDs []int
	// Pooled is set for an init a Pool started before its call: it always has the socket pair at
	// egressFD (closed when the plan has no Egress), and was started with a pipe as its standard
	// input.
	Pooled bool
	// StdinNull makes the sandbox's /dev/null the program's standard input (a pooled init's call
	// without input).
	StdinNull bool
	// HostUmask is the host's umask when a pooled init is taken: the init, started earlier, sets
	// it before the plan's own Umask (if any) applies, as an init started for its call inherits it.
	HostUmask int
	// HostRlimits are the host's resource limits when a pooled init is taken; the init, started
	// earlier, sets them (as far as it may: it cannot raise a hard limit past its own) before the
	// plan's own limits apply, as an init started for its call inherits them.
	HostRlimits []rlimit
	// Files are the files of the plan's paths (pathLists order) as the host found them when it
	// sent the call to a sandbox built ahead for its plan, which runs it only if it was built from
	// those (see zygote_ahead.go); nil otherwise.
	Files []fileID
}

// rlimit is one resource limit of HostRlimits.
type rlimit struct {
	Resource int
	Cur, Max uint64
}

// planProtocol changes whenever the plan's meaning or its wire format (planwire.go) changes.
const planProtocol = 9

// maxPlanSize bounds the encoded plan (it must fit into one pipe buffer, see writePlan).
const maxPlanSize = 1 << 20

// pathListNames names the path lists of a Plan, in error messages.
var pathListNames = [...]string{"ReadOnly", "ReadWrite", "Exec", "Deny", "Protect"}

// pathLists returns pointers to the path lists of p that the init resolves, in the order of
// pathListNames.
func pathLists(p *isolation.Plan) [5]*[]string {
	return [5]*[]string{&p.ReadOnly, &p.ReadWrite, &p.Exec, &p.Deny, &p.Protect}
}

// prepare checks p and returns a copy with its path lists de-duplicated, and with ReadOnly and
// ReadWrite entries covered by a Deny path dropped. It resolves nothing: see Plan. root reports
// whether the host process is root.
func prepare(p isolation.Plan, root bool) (isolation.Plan, error) {
	if !isAbsClean(p.Path) {
		return isolation.Plan{}, fmt.Errorf("nsinit: Path %q is not an absolute clean path", p.Path)
	}
	if len(p.Args) == 0 {
		return isolation.Plan{}, errors.New("nsinit: Args is empty (argv[0] is required)")
	}
	if !isAbsClean(p.Dir) {
		return isolation.Plan{}, fmt.Errorf("nsinit: Dir %q is not an absolute clean path", p.Dir)
	}
	if p.Egress && p.NoNetwork {
		return isolation.Plan{}, errors.New("nsinit: Egress and NoNetwork exclude each other")
	}
	if root && (p.UID <= 0 || p.GID <= 0) {
		return isolation.Plan{}, fmt.Errorf("nsinit: UID %d / GID %d: the program must not run as root", p.UID, p.GID)
	}
	for _, g := range p.Groups {
		if g <= 0 {
			return isolation.Plan{}, fmt.Errorf("nsinit: supplementary group %d: the program must not run with root's group", g)
		}
	}
	out := p
	out.Groups = slices.Compact(slices.Sorted(slices.Values(p.Groups)))
	for i, list := range pathLists(&out) {
		checked := make([]string, 0, len(*list))
		for _, path := range *list {
			if err := checkPath(path); err != nil {
				return isolation.Plan{}, fmt.Errorf("nsinit: %s: %w", pathListNames[i], err)
			}
			if !slices.Contains(checked, path) {
				checked = append(checked, path)
			}
		}
		*list = checked
	}
	for _, a := range out.Absent {
		if err := checkPath(a); err != nil {
			return isolation.Plan{}, fmt.Errorf("nsinit: Absent: %w", err)
		}
	}
	for _, port := range out.Ingress {
		if port < 1 || port > 65535 {
			return isolation.Plan{}, fmt.Errorf("nsinit: Ingress port %d is not a TCP port", port)
		}
	}
	out.Ingress = slices.Compact(slices.Sorted(slices.Values(out.Ingress)))
	for _, d := range out.Deny {
		if d == "/" {
			return isolation.Plan{}, errors.New("nsinit: Deny: cannot mask /")
		}
	}
	for _, rw := range out.ReadWrite {
		if rw == "/" {
			return isolation.Plan{}, errors.New("nsinit: ReadWrite: / cannot be writable")
		}
	}
	for _, e := range out.Exec {
		if d, ok := coveringPath(e, out.Deny); ok {
			return isolation.Plan{}, fmt.Errorf("nsinit: Exec %s lies under Deny %s", e, d)
		}
	}
	// Path is exec'd by name inside the sandbox, where only the Exec files are executable whatever
	// a link leads to; resolving it here only finds it in Exec, it grants nothing.
	path, err := filepath.EvalSymlinks(p.Path)
	if err != nil {
		return isolation.Plan{}, fmt.Errorf("nsinit: Path: %w", err)
	}
	if !slices.Contains(out.Exec, p.Path) && !slices.Contains(out.Exec, path) {
		return isolation.Plan{}, fmt.Errorf("nsinit: Path %s is not listed in Exec", p.Path)
	}
	out.ReadOnly = withoutDenied(out.ReadOnly, out.Deny)
	out.ReadWrite = withoutDenied(out.ReadWrite, out.Deny)
	out.Protect = protectedIn(withoutDenied(out.Protect, out.Deny), out.ReadWrite)
	return out, nil
}

// checkPath checks that path is absolute, clean and outside the sandbox's own /proc and /dev.
func checkPath(path string) error {
	if !isAbsClean(path) {
		return fmt.Errorf("%q is not an absolute clean path", path)
	}
	for _, own := range []string{"/proc", "/dev"} {
		if within(path, own) {
			return fmt.Errorf("%s: paths under %s are provided by the sandbox itself", path, own)
		}
	}
	return nil
}

// isAbsClean reports whether p is an absolute path in canonical form.
func isAbsClean(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p
}

// within reports whether path is dir or lies beneath it. Both must be clean and absolute. (Without
// building dir+"/": it runs for every pair of a plan's path lists, on the call's path.)
func within(path, dir string) bool {
	return dir == "/" || strings.HasPrefix(path, dir) && (len(path) == len(dir) || path[len(dir)] == '/')
}

// coveringPath returns the first of dirs that path lies within.
func coveringPath(path string, dirs []string) (string, bool) {
	for _, d := range dirs {
		if within(path, d) {
			return d, true
		}
	}
	return "", false
}

// withoutDenied returns the paths of list that lie within none of deny.
func withoutDenied(list, deny []string) []string {
	var out []string
	for _, p := range list {
		if _, denied := coveringPath(p, deny); !denied {
			out = append(out, p)
		}
	}
	return out
}

// protectedIn returns the paths of protect that lie within a writable root and within no other
// path of protect.
func protectedIn(protect, writable []string) []string {
	var out []string
	for _, p := range protect {
		if _, ok := coveringPath(p, writable); !ok {
			continue
		}
		if slices.ContainsFunc(protect, func(q string) bool { return q != p && within(p, q) }) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// writePlan encodes e into a new pipe and returns its read end; the write end is closed. The whole
// plan sits in the pipe buffer, so nothing has to wait for the child to start reading.
func writePlan(e envelope) (*os.File, error) {
	data := encodeEnvelope(e)
	if len(data) > maxPlanSize {
		return nil, fmt.Errorf("plan is %d bytes, more than %d", len(data), maxPlanSize)
	}
	// Plain blocking descriptors, outside the runtime's poller: the read end is sent to another
	// process, and the pipe holds the whole plan, so the write does not block.
	rfd, w, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("plan %w", err)
	}
	r := os.NewFile(uintptr(rfd), "plan")
	defer unix.Close(w)
	if len(data) > os.Getpagesize() { // a pipe may hold as little as one page (pipe-user-pages-soft)
		if _, err := unix.FcntlInt(uintptr(w), unix.F_SETPIPE_SZ, len(data)); err != nil {
			r.Close()
			return nil, fmt.Errorf("plan pipe size %d: %w", len(data), err)
		}
	}
	for rest := data; len(rest) > 0; {
		n, err := unix.Write(w, rest)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("write plan: %w", err)
		}
		rest = rest[n:]
	}
	return r, nil
}

// readPlan reads and decodes the envelope from the pipe at fd (the init's is at fd 3), and closes
// it.
func readPlan(fd int) (envelope, error) {
	f := os.NewFile(uintptr(fd), "plan")
	if f == nil {
		return envelope{}, errors.New("no plan pipe on fd 3")
	}
	defer f.Close()
	var b bytes.Buffer
	b.Grow(8 << 10) // a call's plan is a few KiB: read in one go
	if _, err := b.ReadFrom(io.LimitReader(f, maxPlanSize+1)); err != nil {
		return envelope{}, fmt.Errorf("read: %w", err)
	}
	if b.Len() > maxPlanSize {
		return envelope{}, fmt.Errorf("the plan is more than %d bytes", maxPlanSize)
	}
	e, err := decodeEnvelope(b.Bytes())
	if err != nil {
		return envelope{}, fmt.Errorf("decode: %w", err)
	}
	return e, nil
}
