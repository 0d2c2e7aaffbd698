package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/internal/kernfile"
)

// requireCgroups returns the manager of this process, skipping when the host offers no cgroup for
// memory and pids to this process (except under CI=true, where that fails: the limits would then
// not be enforced).
func requireCgroups(t *testing.T) *Manager {
	t.Helper()
	m := Default()
	if m.Mechanism(Memory) == None || m.Mechanism(Pids) == None {
		fixture.Missing(t, "no cgroup for memory (%s) and pids (%s) here: %s", m.Mechanism(Memory), m.Mechanism(Pids), m.Reason())
	}
	return m
}

// TestDetectHybrid checks detection on a hybrid hierarchy (the project's machines): memory, pids
// and CPU accounting come from cgroup v1 when the unified hierarchy does not offer them.
func TestDetectHybrid(t *testing.T) {
	m := requireCgroups(t)
	unified, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil {
		t.Skipf("not a hybrid hierarchy: %v", err)
	}
	for _, c := range controllers {
		if slices.Contains(strings.Fields(string(unified)), c) {
			continue
		}
		if got, want := m.Mechanism(c), V1; got != want {
			t.Errorf("Mechanism(%s) = %s, want %s (unified offers only %q)", c, got, want, unified)
		}
	}
}

// TestGroupLimitsKillRemove puts real processes into a call group, checks the limits landed in the
// controller files, that KillAll leaves no process, and that Remove leaves no directory.
func TestGroupLimitsKillRemove(t *testing.T) {
	m := requireCgroups(t)
	g, err := m.New(Limits{MemoryBytes: 64 << 20, Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove() })
	procs := g.TasksFiles()
	if m.Mechanism(Memory) == V1 {
		if got := readTrim(t, filepath.Join(g.v1[Memory], "memory.limit_in_bytes")); got != strconv.Itoa(64<<20) {
			t.Errorf("memory.limit_in_bytes = %s", got)
		}
		if got := readTrim(t, filepath.Join(g.v1[Pids], "pids.max")); got != "16" {
			t.Errorf("pids.max = %s", got)
		}
	}
	var sleepers []*fixture.Proc
	for range 3 {
		sleeper := fixture.Start(t, exec.Command("sleep", "60"))
		cmd := sleeper.Cmd
		sleepers = append(sleepers, sleeper)
		for _, p := range procs {
			if err := kernfile.WriteFile(p, strconv.Itoa(cmd.Process.Pid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(g.procs()); n != 3 {
		t.Fatalf("the group holds %d processes, want 3", n)
	}
	if err := g.KillAll(); err != nil {
		t.Fatal(err)
	}
	for _, sleeper := range sleepers {
		_ = sleeper.Wait()
		if ws := sleeper.Cmd.ProcessState.String(); ws != "signal: killed" {
			t.Errorf("sleep %d: %s, want killed", sleeper.Cmd.Process.Pid, ws)
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if live := m.Live(); len(live) != 0 {
		t.Errorf("groups left: %v", live)
	}
}

// TestReap leaves a group of a daemon that is gone (a pid that exited) with a process in it, as a
// kill -9 of clihostd does, and checks that Reap kills the process and removes the group while a
// live daemon's group (this one's) stays.
func TestReap(t *testing.T) {
	m := requireCgroups(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := &Manager{mech: m.mech, v1: m.v1, v2: m.v2, owner: dead.Process.Pid}
	g, err := orphan.New(Limits{Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := m.New(Limits{Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove(); _ = ours.Remove() })
	sleeper := fixture.Start(t, exec.Command("sleep", "60"))
	for _, p := range g.TasksFiles() {
		if err := kernfile.WriteFile(p, strconv.Itoa(sleeper.Cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := m.Reap()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, g.Name()) || slices.Contains(removed, ours.Name()) {
		t.Fatalf("Reap removed %v, want %s and not %s", removed, g.Name(), ours.Name())
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphaned group's process survived Reap")
	}
	if live := m.Live(); !slices.Equal(live, []string{ours.Name()}) {
		t.Errorf("live groups %v, want only %s", live, ours.Name())
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data[:len(data)-1])
}

// TestV2CloneIntoAndKill exercises the cgroup v2 path that a hybrid host can run without v2
// controllers: a group on the unified hierarchy, a process cloned straight into it
// (CLONE_INTO_CGROUP, as nsinit does with V2Dir), KillAll through cgroup.kill, and Remove.
func TestV2CloneIntoAndKill(t *testing.T) {
	own, err := ownGroups()
	if err != nil {
		t.Fatal(err)
	}
	dir, ok := own.v2Dir()
	if !ok || probeWritable(dir) != nil {
		t.Skip("no writable unified hierarchy here")
	}
	m := &Manager{v2: dir, mech: map[string]Mechanism{Memory: None, Pids: None, CPU: None}, v1: map[string]string{}, owner: os.Getpid()}
	g, err := m.New(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove() })
	if _, err := os.Stat(filepath.Join(g.V2Dir(), "cgroup.kill")); err != nil {
		t.Skipf("kernel without cgroup.kill: %v", err)
	}
	f, err := os.Open(g.V2Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	sleeper := fixture.Start(t, cmd)
	if got := g.procs(); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Fatalf("group holds %v, want [%d]", got, cmd.Process.Pid)
	}
	if err := g.KillAll(); err != nil {
		t.Fatal(err)
	}
	_ = sleeper.Wait()
	if ws := cmd.ProcessState.String(); ws != "signal: killed" {
		t.Errorf("sleep: %s, want killed by cgroup.kill", ws)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.V2Dir()); !os.IsNotExist(err) {
		t.Errorf("%s still exists: %v", g.V2Dir(), err)
	}
}
