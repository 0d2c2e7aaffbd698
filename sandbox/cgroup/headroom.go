package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// unlimitedV1 is the smallest cgroup v1 memory limit read as "no limit" (the kernel shows an unset
// limit as a page-rounded 2^63-1).
const unlimitedV1 = 1 << 62

// MemoryHeadroom is how much more memory this process's cgroup may use before it reaches a
// memory limit: the smallest (limit − usage) over its group and the groups above it, on the
// unified hierarchy when the process has a group there, else on the v1 memory hierarchy. limited
// is false when no group on the way up has a limit, or the hierarchy is not mounted.
func MemoryHeadroom() (bytes int64, limited bool) {
	h, err := ownGroups()
	if err != nil {
		return 0, false
	}
	dir, top, limitFile, usageFile := "", "", "memory.max", "memory.current"
	if d, ok := h.v2Dir(); ok && h.v2Mount != nil {
		if _, err := os.Stat(filepath.Join(d, "memory.current")); err == nil {
			dir, top = d, h.v2Mount.point
		}
	}
	if dir == "" {
		d, ok := h.v1Dir("memory")
		if !ok {
			return 0, false
		}
		dir, top, limitFile, usageFile = d, h.v1Mount["memory"].point, "memory.limit_in_bytes", "memory.usage_in_bytes"
	}
	for {
		if room, ok := groupHeadroom(dir, limitFile, usageFile); ok && (!limited || room < bytes) {
			bytes, limited = room, true
		}
		if dir == top || !strings.HasPrefix(dir, top) {
			return bytes, limited
		}
		dir = filepath.Dir(dir)
	}
}

// groupHeadroom is limit − usage of one group (0 when over), or false when it has no limit.
func groupHeadroom(dir, limitFile, usageFile string) (int64, bool) {
	data, err := os.ReadFile(filepath.Join(dir, limitFile))
	if err != nil {
		return 0, false
	}
	limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || limit >= unlimitedV1 { // "max" on v2 does not parse
		return 0, false
	}
	usage, err := readInt(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, false
	}
	return max(limit-usage, 0), true
}
