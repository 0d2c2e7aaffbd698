package cgroup

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/internal/kernfile"
)

// runIn runs script with sh in g, from its start (see startIn), and returns once the shell has
// exited.
func runIn(t *testing.T, g *Group, script string) {
	t.Helper()
	_ = startIn(t, g, script).Wait()
}

// startIn starts script with sh in g, from its start: the shell waits for a line on its input
// until this process has moved it into every group of g, as a call's program joins them before it
// execs.
func startIn(t *testing.T, g *Group, script string) *fixture.Proc {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read go; "+script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := fixture.Start(t, cmd)
	pid := strconv.Itoa(cmd.Process.Pid)
	for _, f := range g.TasksFiles() {
		if err := kernfile.WriteFile(f, pid); err != nil {
			t.Fatal(err)
		}
	}
	if d := g.V2Dir(); d != "" {
		if err := kernfile.WriteFile(filepath.Join(d, "cgroup.procs"), pid); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = io.WriteString(in, "go\n")
	_ = in.Close()
	return p
}

// TestReuseCountsOnlyTheNextCall: a group readied by Reuse reports only what its next call
// counted (its CPU time, its refused forks), so that a CPU limit is the next call's whole budget
// and a limit the last call reached is not blamed on the next; and a group whose call reached a
// limit, still holds a process, or still has more than a quarter of its memory limit charged is
// not reused.
func TestReuseCountsOnlyTheNextCall(t *testing.T) {
	m := requireCgroups(t)
	if m.Mechanism(CPU) == None {
		fixture.Missing(t, "no CPU accounting for the call's groups: %s", m.Reason())
	}
	limits := Limits{MemoryBytes: 64 << 20, Pids: 8, CPU: time.Minute}
	g, err := m.New(limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove() })

	burn := `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`
	runIn(t, g, burn)
	first := g.Events()
	if !first.CPUCounted || first.CPUUsage < 10*time.Millisecond {
		t.Fatalf("the first call's CPU time: %+v", first)
	}
	if err := g.Reuse(); err != nil {
		t.Fatalf("a group whose call reached no limit was not reused: %v", err)
	}
	if e := g.Events(); e.CPUUsage > first.CPUUsage/10 || e.PidsMax != 0 || e.OOMKills != 0 {
		t.Fatalf("right after Reuse the group reports %+v, want nothing (the first call used %s)", e, first.CPUUsage)
	}
	if usage, ok := g.cpuUsage(); !ok || usage > first.CPUUsage/10 {
		t.Fatalf("the CPU watch would start from %s, not from zero", usage)
	}

	// The second call reaches the process limit: counted for it, and its group is not reused. In
	// a PID namespace of its own, as a call's program: the shell dies of the refused fork, and the
	// kernel kills and reaps what it started before unshare, its parent, returns.
	runIn(t, g, `exec unshare --pid --fork sh -c 'n=0; while [ $n -lt 16 ]; do sleep 2 & n=$((n+1)); done; wait' 2>/dev/null`)
	if n, err := g.tasksLeft(); err != nil || n != 0 {
		t.Fatalf("%d processes left after the second call (%v)", n, err)
	}
	if e := g.Events(); e.PidsMax == 0 {
		t.Fatalf("the second call's refused forks are not counted: %+v", e)
	}
	if err := g.Reuse(); !errors.Is(err, ErrNotReusable) {
		t.Fatalf("a group whose call reached its process limit was reused: %v", err)
	}

	// A process left in a group: not reused.
	h, err := m.New(limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Remove() })
	left := startIn(t, h, `exec sleep 30`)
	if err := h.Reuse(); !errors.Is(err, ErrNotReusable) {
		t.Fatalf("a group still holding a process was reused: %v", err)
	}
	if err := h.KillAll(); err != nil {
		t.Fatal(err)
	}
	_ = left.Wait()

	// Memory the call left charged to the group (a file it wrote): not reused above a quarter of
	// the limit, reused once it is gone.
	file := filepath.Join(t.TempDir(), "cache")
	runIn(t, h, "head -c 40000000 /dev/zero > "+file)
	if used, _ := h.memoryCharged(); used < 20<<20 {
		t.Skipf("the file written is not charged to the group here (%d bytes)", used)
	}
	if err := h.Reuse(); !errors.Is(err, ErrNotReusable) {
		t.Fatalf("a group with 40 MB of its 64 MiB still charged was reused: %v", err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := h.Reuse(); err != nil {
		t.Fatalf("once its file was removed the group was still not reused: %v", err)
	}

	// Limits no longer those Apply wrote: not reused.
	pidsMax := filepath.Join(h.v1[Pids], "pids.max")
	if h.v2 != "" && m.Mechanism(Pids) == V2 {
		pidsMax = filepath.Join(h.v2, "pids.max")
	}
	if err := kernfile.WriteFile(pidsMax, "max"); err != nil {
		t.Fatal(err)
	}
	if err := h.Reuse(); !errors.Is(err, ErrNotReusable) {
		t.Fatalf("a group whose process limit was lifted was reused: %v", err)
	}
}
