package install_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox/cgroup"
)

// needRoot skips a test that mounts or makes cgroups, except under CI=true, where it fails.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		fixture.Missing(t, "this test mounts a tmpfs or creates a cgroup: it needs root")
	}
}

// smallFS mounts a tmpfs of size MiB on a fresh folder and returns the folder.
func smallFS(t *testing.T, size int) string {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%dm,mode=0755", size)); err != nil {
		fixture.Missing(t, "mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestRequiresDiskOnTheInstallFilesystem installs into a state directory on an 8 MiB tmpfs: a
// bundle asking for 64 MB of disk is refused before any entry runs, naming the free and the
// required amount and the filesystem; one asking for 4 MB installs.
func TestRequiresDiskOnTheInstallFilesystem(t *testing.T) {
	state := smallFS(t, 8)
	s := newServer(t)
	u := s.serve("/tool", toolScript)
	o := options(t)
	o.StateDir = filepath.Join(state, "state") // not created yet: measured at its parent
	b := bundle(manifest.InstallMethod{Method: "download", URL: u, VerifySHA256: sum(toolScript)})
	b.CLI.Requires = &manifest.Requires{MinDiskMB: 64}
	_, err := install.Install(context.Background(), b, o)
	var re *install.RequiresError
	if !errors.Is(err, install.ErrInstallFailed) || !errors.As(err, &re) {
		t.Fatalf("err = %v, want a RequiresError", err)
	}
	for _, want := range []string{"MB free on the filesystem of " + filepath.Join(o.StateDir, "bin"), "requires.min_disk_mb is 64 MB"} {
		if !strings.Contains(re.Message, want) {
			t.Errorf("message %q lacks %q", re.Message, want)
		}
	}
	if !strings.Contains(re.Hint, "free at least") {
		t.Errorf("hint %q", re.Hint)
	}
	if free := freeMB(t, re.Message); free < 6 || free > 8 {
		t.Errorf("reported %d MB free on an 8 MiB tmpfs", free)
	}
	if s.hitCount("/tool") != 0 {
		t.Error("the entry was downloaded although the disk is too small")
	}
	// What the daemon's status (and so doctor) reports is the same measure.
	if _, refused, declared, err := install.CheckBundle(b, o); err != nil || !declared || refused == nil {
		t.Errorf("CheckBundle: refused %v, declared %v, err %v", refused, declared, err)
	}

	b.CLI.Requires.MinDiskMB = 4
	if _, err := install.Install(context.Background(), b, o); err != nil {
		t.Fatalf("4 MB on an 8 MiB filesystem: %v", err)
	}
	if _, refused, _, err := install.CheckBundle(b, o); err != nil || refused != nil {
		t.Errorf("CheckBundle after install: %v %v", refused, err)
	}
}

// freeMB reads the "N MB free" of a refusal.
func freeMB(t *testing.T, msg string) int {
	t.Helper()
	i := strings.Index(msg, " MB free")
	j := strings.LastIndex(msg[:max(i, 0)], " ")
	n, err := strconv.Atoi(msg[j+1 : max(i, 0)])
	if i < 0 || err != nil {
		t.Fatalf("no free amount in %q", msg)
	}
	return n
}

// TestRequiresMemory: MemAvailable bounds what an install may count on.
func TestRequiresMemory(t *testing.T) {
	o := options(t)
	b := bundle(manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1:1/never"})
	b.CLI.Requires = &manifest.Requires{MinMemoryMB: 1 << 30} // a petabyte
	_, err := install.Install(context.Background(), b, o)
	var re *install.RequiresError
	if !errors.As(err, &re) || !strings.Contains(re.Message, "requires.min_memory_mb is 1073741824 MB") || !strings.Contains(re.Message, "MB of memory available") {
		t.Fatalf("err = %v", err)
	}
	r, err := install.Measure(o.StateDir)
	if err != nil || r.AvailableMemoryMB <= 0 {
		t.Fatalf("Measure = %+v, %v", r, err)
	}
}

const helperEnv = "CLIHOST_REQUIRES_HELPER"

// TestRequiresHelper is the child process of TestRequiresMemoryCgroup: once its parent has moved
// it into a group (a line on stdin), it prints what Measure finds.
func TestRequiresHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the child of TestRequiresMemoryCgroup")
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	r, err := install.Measure(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := bundle(manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1:1/never"})
	b.CLI.Requires = &manifest.Requires{MinMemoryMB: 200}
	_, ierr := install.Install(context.Background(), b, options(t))
	var re *install.RequiresError
	msg := ""
	if errors.As(ierr, &re) {
		msg = re.Message + " | " + re.Hint
	}
	out, _ := json.Marshal(map[string]any{"r": r, "refusal": msg})
	fmt.Println("RESULT " + string(out))
}

// TestRequiresMemoryCgroup runs a process in a real cgroup limited to 128 MiB: what it may count
// on is the group's headroom, not the host's MemAvailable, and a bundle asking for 200 MB is
// refused with a hint about the cgroup's limit.
func TestRequiresMemoryCgroup(t *testing.T) {
	needRoot(t)
	m := cgroup.Detect()
	g, err := m.New(cgroup.Limits{MemoryBytes: 128 << 20})
	if err != nil || g == nil {
		fixture.Missing(t, "no memory cgroup can be created here: %v (%s)", err, m.Reason())
	}
	t.Cleanup(func() { _ = g.Remove() })
	cmd := exec.Command(os.Args[0], "-test.run=^TestRequiresHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	procs := []string{}
	if g.V2Dir() != "" {
		procs = append(procs, filepath.Join(g.V2Dir(), "cgroup.procs"))
	}
	for _, tasks := range g.TasksFiles() {
		procs = append(procs, filepath.Join(filepath.Dir(tasks), "cgroup.procs"))
	}
	for _, p := range procs {
		if err := os.WriteFile(p, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("join %s: %v", p, err)
		}
	}
	_, _ = io.WriteString(stdin, "go\n")
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	_, line, ok := strings.Cut(out.String(), "RESULT ")
	if !ok {
		t.Fatalf("no result:\n%s", out.String())
	}
	var res struct {
		R       install.Resources
		Refusal string
	}
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &res); err != nil {
		t.Fatal(err)
	}
	if res.R.MemoryBound != "cgroup memory limit" || res.R.AvailableMemoryMB > 128 || res.R.AvailableMemoryMB <= 0 {
		t.Errorf("in a 128 MiB group: %+v", res.R)
	}
	if !strings.Contains(res.Refusal, "requires.min_memory_mb is 200 MB") || !strings.Contains(res.Refusal, "cgroup memory limit") || !strings.Contains(res.Refusal, "MemoryMax=") {
		t.Errorf("refusal %q", res.Refusal)
	}
}
