package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// cgroupDirsOf lists the cgroup directories (any hierarchy) named after process pid: clihost-<pid>-<n>.
func cgroupDirsOf(pid int) []string {
	var out []string
	prefix := fmt.Sprintf("clihost-%d-", pid)
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), prefix) {
			out = append(out, path)
			return filepath.SkipDir
		}
		if strings.Count(strings.TrimPrefix(path, "/sys/fs/cgroup"), "/") > 4 {
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

// TestInProcessCallRemovesItsGroups: `clihostctl call` without a daemon runs the CLI in its own
// process, with the call's control groups (memory and pids limits are on by default). Since the
// init reports the end of the sandbox before it exits, runner.Run returns at once and leaves the
// init's reaping and the groups' removal to a goroutine (nsinit Cmd.Finish); clihostctl prints
// the result and exits before that goroutine runs, so every in-process call leaves its groups
// behind (one empty directory per hierarchy: here the memory and pids ones of cgroup v1). Only a
// daemon's start reaps them (daemon/reap.go); a host that only uses clihostctl (CI, scripts)
// accumulates one memory cgroup per call, and the kernel allows at most 65535 memory cgroups
// (MEM_CGROUP_ID_MAX), after which no one on the host can create one. clihostctl (and the daemon,
// when it closes) now waits for them before it exits (runner.Cleanup).
func TestInProcessCallRemovesItsGroups(t *testing.T) {
	fixture.NeedRoot(t) // the call groups
	fixture.Need(t, "jq")
	ws := fixture.Workspace(t)
	for i := range 3 {
		cmd := exec.Command(bin.ctl, "call", "jq", "eval", "--socket", filepath.Join(t.TempDir(), "none.sock"),
			"--workspace", ws, "--audit", os.DevNull, "--input", `{"json": "[1,2]", "filter": "add"}`)
		cmd.Env = append(os.Environ(), "CLIHOST_BUNDLES=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"ok": true`) {
			t.Fatalf("call %d: %v\n%s", i, err, out)
		}
		pid := cmd.Process.Pid
		var left []string
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if left = cgroupDirsOf(pid); len(left) == 0 {
				break
			}
		}
		for _, d := range left {
			_ = os.Remove(d) // empty: the test cleans up after the defect it shows
		}
		if len(left) > 0 {
			t.Errorf("call %d: clihostctl (pid %d) exited leaving its call's control groups: %v", i, pid, left)
		}
	}
}
