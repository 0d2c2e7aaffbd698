package install

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox/cgroup"
)

// mib is a mebibyte, the unit of requires.min_disk_mb and min_memory_mb.
const mib = 1 << 20

// RequiresError is an install refused because the host has less free disk or available memory
// than the bundle's requires.min_disk_mb or min_memory_mb asks. Its message names both amounts.
type RequiresError struct {
	Message string
	Hint    string
}

func (e *RequiresError) Error() string { return e.Message }

// Resources is what this host has for a bundle's requires: the free space of the filesystem at
// DiskPath and the memory this process may still use.
type Resources struct {
	DiskPath   string `json:"disk_path"`
	FreeDiskMB int64  `json:"free_disk_mb"`
	// AvailableMemoryMB is /proc/meminfo's MemAvailable, or what the process's cgroup limit leaves
	// when that is less; MemoryBound says which ("MemAvailable" or "cgroup memory limit").
	AvailableMemoryMB int64  `json:"available_memory_mb"`
	MemoryBound       string `json:"memory_bound"`
}

// Measure reads the free space of the filesystem holding dir (what an unprivileged writer may
// use, statfs's f_bavail) and the memory available to this process.
// A dir that does not exist yet (a first install's bin folder) is measured at its nearest existing
// parent, the filesystem it will be created on.
func Measure(dir string) (Resources, error) {
	r := Resources{DiskPath: dir}
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return r, fmt.Errorf("free space of %s: %w", dir, err)
	}
	r.FreeDiskMB = int64(st.Bavail) * st.Bsize / mib
	avail, err := memAvailable()
	if err != nil {
		return r, err
	}
	r.AvailableMemoryMB, r.MemoryBound = avail/mib, "MemAvailable"
	if room, limited := cgroup.MemoryHeadroom(); limited && room < avail {
		r.AvailableMemoryMB, r.MemoryBound = room/mib, "cgroup memory limit"
	}
	return r, nil
}

// memAvailable is MemAvailable of /proc/meminfo, in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("available memory: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("available memory: /proc/meminfo: %q: %w", s.Text(), err)
			}
			return kb * 1024, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("available memory: /proc/meminfo: %w", err)
	}
	return 0, fmt.Errorf("available memory: /proc/meminfo has no MemAvailable")
}

// CheckRequires compares a bundle's requires.min_disk_mb and min_memory_mb (nil or zero: no
// requirement) with what r measured, and returns the refusal, or nil when both are met.
func CheckRequires(req *manifest.Requires, r Resources) *RequiresError {
	if req == nil {
		return nil
	}
	var short, hints []string
	if req.MinDiskMB > 0 && r.FreeDiskMB < int64(req.MinDiskMB) {
		short = append(short, fmt.Sprintf("%d MB free on the filesystem of %s, the bundle's requires.min_disk_mb is %d MB", r.FreeDiskMB, r.DiskPath, req.MinDiskMB))
		hints = append(hints, fmt.Sprintf("free at least %d MB on the filesystem of %s", int64(req.MinDiskMB)-r.FreeDiskMB, r.DiskPath))
	}
	if req.MinMemoryMB > 0 && r.AvailableMemoryMB < int64(req.MinMemoryMB) {
		short = append(short, fmt.Sprintf("%d MB of memory available (%s), the bundle's requires.min_memory_mb is %d MB", r.AvailableMemoryMB, r.MemoryBound, req.MinMemoryMB))
		if r.MemoryBound == "MemAvailable" {
			hints = append(hints, "free memory on the host, or install where more is available")
		} else {
			hints = append(hints, "raise the memory limit of clihostd's cgroup (MemoryMax= in its systemd unit)")
		}
	}
	if len(short) == 0 {
		return nil
	}
	return &RequiresError{Message: "this host does not meet the bundle's requirements: " + strings.Join(short, "; "),
		Hint: strings.Join(hints, "; ") + ", then install again"}
}

// requires checks the bundle's requires.min_disk_mb and min_memory_mb before entry e runs: the
// disk on the filesystem e writes to (writesTo), the memory this process may use.
func (in *installer) requires(e manifest.InstallMethod) error {
	req := in.b.CLI.Requires
	if req == nil || req.MinDiskMB <= 0 && req.MinMemoryMB <= 0 {
		return nil
	}
	r, err := Measure(in.writesTo(e))
	if err != nil {
		return fmt.Errorf("checking requires.min_disk_mb and min_memory_mb: %w", err)
	}
	if rerr := CheckRequires(req, r); rerr != nil {
		return rerr
	}
	return nil
}

// writesTo is the folder whose filesystem entry e fills: the system's /usr for package managers
// that install system-wide (apt, dnf, pacman), else the state directory's bin folder, under which
// clihost stages and keeps what it downloads, builds and installs into its own prefixes.
func (in *installer) writesTo(e manifest.InstallMethod) string {
	switch e.Method {
	case manifest.MethodDownload, manifest.MethodCurl, manifest.MethodVendored, manifest.MethodGo:
	default:
		if in.toolCommand(e).root {
			return "/usr"
		}
	}
	return filepath.Join(in.o.StateDir, "bin")
}

// CheckBundle measures and checks b's requires.min_disk_mb and min_memory_mb as an install with
// options o would before its first install entry that applies to this platform. declared is false
// when b declares neither (nothing is measured then).
func CheckBundle(b *manifest.Bundle, o Options) (r Resources, refused *RequiresError, declared bool, err error) {
	in, err := newInstaller(b, o)
	if err != nil {
		return r, nil, false, err
	}
	req := b.CLI.Requires
	if req == nil || req.MinDiskMB <= 0 && req.MinMemoryMB <= 0 {
		return r, nil, false, nil
	}
	dir := filepath.Join(in.o.StateDir, "bin")
	for _, e := range b.CLI.Install {
		if !e.Experimental && manifest.IsKnownMethod(e.Method) && in.platformMismatch("", e.OS, e.Arch) == "" {
			dir = in.writesTo(e)
			break
		}
	}
	if r, err = Measure(dir); err != nil {
		return r, nil, true, err
	}
	return r, CheckRequires(req, r), true, nil
}
