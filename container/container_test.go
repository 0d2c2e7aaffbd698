package container

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/mountinfo"
)

// TestArgs: the program and its arguments follow the image verbatim, one argument each (no
// shell); no network, no capabilities, the limits as flags; no environment value on the command
// line (it goes in the env file).
func TestArgs(t *testing.T) {
	hostile := []string{"jq", "; rm -rf / #", "$(id)", "--privileged", "-v=/:/host"}
	s := Spec{Name: "clihost-x", Image: "localhost/jq:1", Workspace: "/work/ws", Mounts: []Mount{{Source: "/work/ws", Target: "/work/ws"}, {Source: "/e", Target: "/work/ws/.env", ReadOnly: true}}, UID: 1000, GID: 1000, EnvFile: "/run/e", Argv: hostile,
		Timeout: 1500 * time.Millisecond, Limits: Limits{MemoryBytes: 64 << 20, Pids: 32, NoFile: 256, CPU: 2 * time.Second, TmpfsBytes: 1 << 20}}
	a, err := Runtime{Name: "podman", Path: "/usr/bin/podman"}.Args(s)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(a, "localhost/jq:1")
	if i < 2 || a[i-1] != "--" || a[i-2] != "--entrypoint=jq" || !slices.Equal(a[i+1:], hostile[1:]) {
		t.Fatalf("argv after the image: %q", a)
	}
	for _, want := range []string{"--network=none", "--cap-drop=all", "--read-only", "--pull=never", "--user=1000:1000", "--env-file=/run/e",
		"--memory=67108864", "--pids-limit=32", "--ulimit=nofile=256:256", "--ulimit=nproc=32:32", "--ulimit=cpu=2:2", "--timeout=12",
		"--http-proxy=false", "--mount=type=bind,source=/work/ws,destination=/work/ws", "--mount=type=bind,source=/e,destination=/work/ws/.env,readonly=true", "--workdir=/work/ws", "--tmpfs=/tmp:rw,nosuid,nodev,size=1048576"} {
		if !slices.Contains(a[:i], want) {
			t.Errorf("missing %s in %q", want, a[:i])
		}
	}
	if _, err := (Runtime{Name: "docker"}).Args(Spec{Image: "i", Workspace: "/a", Mounts: []Mount{{Source: "/a,readonly=false", Target: "/a"}}, Argv: []string{"x"}}); err == nil {
		t.Fatal("a workspace with a comma was accepted into --mount")
	}
	if _, err := (Runtime{Name: "docker"}).Args(Spec{Image: "--privileged", Workspace: "/a", Argv: []string{"x"}}); err == nil {
		t.Fatal("an image starting with - was accepted")
	}
}

// TestWriteEnvFile: the file is its owner's alone; a value with a newline (which would smuggle a
// second variable) is refused.
func TestWriteEnvFile(t *testing.T) {
	dir := t.TempDir()
	p, err := WriteEnvFile(dir, []string{"A=1", "B=x=y"})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	data, _ := os.ReadFile(p)
	if st.Mode().Perm() != 0o600 || string(data) != "A=1\nB=x=y\n" {
		t.Fatalf("mode %v, data %q", st.Mode(), data)
	}
	if _, err := WriteEnvFile(dir, []string{"A=1\nLD_PRELOAD=/x"}); err == nil {
		t.Fatal("a newline in a value was written")
	}
}

// TestFindNone: no podman and no docker on PATH names both.
func TestFindNone(t *testing.T) {
	_, err := Find(context.Background(), func(string) (string, error) { return "", errors.New("no") }, nil)
	if !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "podman or docker") {
		t.Fatalf("err %v", err)
	}
}

// TestArgsSecretEnv: secrets are named to the runtime (--env=NAME, the value taken from its own
// environment), never given with their value; a name that would carry one is refused.
func TestArgsSecretEnv(t *testing.T) {
	s := Spec{Name: "c", Image: "localhost/jq:1", Workspace: "/w", EnvFile: "/run/e", Argv: []string{"jq"}, SecretEnv: []string{"A_TOKEN"}}
	a, err := Runtime{Name: "podman"}.Args(s)
	if err != nil || !slices.Contains(a, "--env=A_TOKEN") {
		t.Fatalf("args %q, %v: want --env=A_TOKEN", a, err)
	}
	for _, bad := range []string{"A_TOKEN=value", "", "A\nB"} {
		s.SecretEnv = []string{bad}
		if _, err := (Runtime{Name: "podman"}).Args(s); err == nil {
			t.Errorf("secret variable %q accepted", bad)
		}
	}
}

// TestImageNameIsAReference: an image name is a reference in the runtime's local store, never a
// transport (containers-storage:[driver@root+runroot:options]name opens, and creates, another
// store chosen by the bundle, whose image `create --pull=never` copies in; docker-archive:,
// oci:, dir: read host paths; docker:// pulls). Such a name is refused before the runtime sees it.
func TestImageNameIsAReference(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("no podman")
	}
	rt := Runtime{Name: "podman", Path: "podman"}
	store := filepath.Join(t.TempDir(), "store")
	for _, image := range []string{
		"containers-storage:[vfs@" + store + "+" + store + "-run]localhost/evil:1",
		"containers-storage:localhost/evil:1", "docker-archive:/tmp/x.tar", "oci:/tmp/x", "dir:/etc", "docker://docker.io/library/alpine",
		"oci-archive:/tmp/x.tar", "localhost/x:1 --privileged", "Localhost/UPPER", "x@sha256:zz", "",
	} {
		if err := rt.ImagePresent(context.Background(), os.Environ(), image); err == nil || !strings.Contains(err.Error(), "not an image name") {
			t.Errorf("%q: want refused as not an image name, got %v", image, err)
		}
		if _, err := rt.Args(Spec{Image: image, Workspace: "/a", Argv: []string{"x"}}); err == nil {
			t.Errorf("%q: a create was built", image)
		}
	}
	if _, err := os.Stat(store); err == nil {
		t.Fatalf("the runtime made the store %s an image name named", store)
	}
	for _, image := range []string{"alpine", "localhost/jq:1.7", "docker.io/library/alpine:3.19", "registry.example.com:5000/team/tool_x-1.2:v1.0",
		"localhost/x@sha256:" + strings.Repeat("a", 64)} {
		if err := ValidImage(image); err != nil {
			t.Errorf("%q: %v", image, err)
		}
	}
}

// TestMountPoints: mountinfo's escaped mount points (a space is \040) are counted as the paths
// they name, so a workspace with a space in its path passes the mount check.
func TestMountPoints(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mountinfo")
	data := "1 0 254:0 / / rw - ext4 /dev/vda rw\n" +
		"2 1 254:0 /w\\040s /w\\040s rw - ext4 /dev/vda rw\n" +
		"3 1 254:0 /w\\040s /w\\040s ro - ext4 /dev/vda rw\n"
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	points, err := mountPoints(file)
	if err != nil || points["/w s"] != 2 || points["/"] != 1 {
		t.Fatalf("points %v, err %v", points, err)
	}
	if mountinfo.Unescape(`a\134b\011`) != "a\\b\t" || mountinfo.Unescape(`tail\04`) != `tail\04` {
		t.Fatal("unescape")
	}
	if !hidden(Mount{Target: "/w/a"}, []Mount{{Target: "/w"}}) || hidden(Mount{Target: "/w/a"}, []Mount{{Target: "/w/ab"}}) {
		t.Fatal("hidden")
	}
}
