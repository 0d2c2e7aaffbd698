package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clihost/clihost/internal/mountinfo"
)

// hierarchies is where this process sits: its group path per v1 controller and on the unified
// hierarchy, and where each hierarchy is mounted.
type hierarchies struct {
	v1Path  map[string]string // v1 controller -> this process's group path in its hierarchy
	v2Path  string            // this process's path on the unified hierarchy ("" when it has none)
	v1Mount map[string]mount  // v1 controller -> its hierarchy's mount
	v2Mount *mount
}

// mount is a mounted cgroup hierarchy: its mount point and the group it shows at that point.
type mount struct {
	point, root string
}

// dir maps a group path of the hierarchy to its directory under the mount, or false when the
// group lies outside what the mount shows.
func (m mount) dir(path string) (string, bool) {
	rel, ok := strings.CutPrefix(path, m.root)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && m.root != "/") {
		return "", false
	}
	return filepath.Join(m.point, rel), true
}

// ownGroups reads /proc/self/cgroup and /proc/self/mountinfo.
func ownGroups() (hierarchies, error) {
	h := hierarchies{v1Path: map[string]string{}, v1Mount: map[string]mount{}}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return h, fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			h.v2Path = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			h.v1Path[c] = parts[2]
		}
	}
	if err := s.Err(); err != nil {
		return h, fmt.Errorf("cgroup: read /proc/self/cgroup: %w", err)
	}
	if err := h.readMounts(); err != nil {
		return h, err
	}
	return h, nil
}

// readMounts finds the cgroup and cgroup2 mounts in /proc/self/mountinfo.
func (h *hierarchies) readMounts() error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		m := mount{point: mountinfo.Unescape(fields[4]), root: mountinfo.Unescape(fields[3])}
		switch tail[0] {
		case "cgroup2":
			if h.v2Mount == nil {
				h.v2Mount = &m
			}
		case "cgroup":
			for _, opt := range strings.Split(tail[2], ",") {
				if _, seen := h.v1Mount[opt]; !seen && slices.Contains([]string{"memory", "pids", "cpuacct", "freezer"}, opt) {
					h.v1Mount[opt] = m
				}
			}
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("cgroup: read /proc/self/mountinfo: %w", err)
	}
	return nil
}

// v2Dir is this process's unified group directory, when the unified hierarchy is mounted.
func (h hierarchies) v2Dir() (string, bool) {
	if h.v2Mount == nil || h.v2Path == "" {
		return "", false
	}
	return h.v2Mount.dir(h.v2Path)
}

// v1Dir is this process's group directory in the v1 hierarchy of controller c.
func (h hierarchies) v1Dir(c string) (string, bool) {
	m, ok := h.v1Mount[c]
	path, in := h.v1Path[c]
	if !ok || !in {
		return "", false
	}
	dir, ok := m.dir(path)
	if !ok {
		return "", false
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	return dir, true
}
