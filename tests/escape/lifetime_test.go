package escape

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// lifetimeHostEnv, when set, makes TestSandboxDiesWithItsHost the host: it runs the probe's linger
// case with the token the variable holds and waits to be killed.
const lifetimeHostEnv = "CLIHOST_ESCAPE_LIFETIME_HOST"

// TestSandboxDiesWithItsHost kills a host with SIGKILL while a call runs a CLI that ignores SIGTERM
// and left a child in a session of its own (issue 10 §4): within a second nothing of the call may
// be left. The host is this test binary re-executed, calling through host.Call as clihostd does.
// Before the fix the init had lost its parent-death signal to its uid change, and both probes
// kept running.
func TestSandboxDiesWithItsHost(t *testing.T) {
	if token := os.Getenv(lifetimeHostEnv); token != "" {
		lingerHost(t, token)
		return
	}
	requireCorpus(t)
	token := fmt.Sprintf("linger-%09d", rand.IntN(1e9))
	// The host is killed: what it makes in the temporary directory goes with this test's.
	tmp := t.TempDir()
	fixture.Reachable(t, tmp)
	env := append(os.Environ(), lifetimeHostEnv+"="+token, sharedDirsEnv+"="+probeDir+"\n"+outside, "TMPDIR="+tmp)
	hostProc, line, err := fixture.Rerun(t, env)
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("the host said %q: %v", line, err)
	}
	before := lingering(token)
	if len(before) < 2 {
		t.Fatalf("want the probe and its child running, found %v", before)
	}
	if err := hostProc.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = hostProc.Wait()
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := lingering(token)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("a second after the host's SIGKILL, processes %v of its call still run", left)
		}
	}
}

// lingerHost is TestSandboxDiesWithItsHost's host: it starts the linger call, says "ready" once the
// probe and its child run, and waits to be killed.
func lingerHost(t *testing.T, token string) {
	s := newSuite(t)
	b, err := s.h.Bundle("ro")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan host.Envelope, 1)
	go func() {
		input := map[string]any{"case": "linger", "args": []any{token}}
		done <- s.h.Call(context.Background(), b, "run", input, host.Caller{Workspace: s.ro, User: "escape"}, host.CallOptions{})
	}()
	for deadline := time.Now().Add(20 * time.Second); len(lingering(token)) < 2; time.Sleep(10 * time.Millisecond) {
		select {
		case env := <-done:
			t.Fatalf("the call ended before its host was killed: %+v %+v", env, env.Error)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the linger probe did not start: %v", lingering(token))
		}
	}
	fmt.Println("ready")
	env := <-done
	t.Fatalf("the call ended before its host was killed: %+v %+v", env, env.Error)
}

// lingering returns the pids of the processes whose command line holds token (the linger probe
// and its child), zombies excluded.
func lingering(token string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && len(data) > 0 && strings.Contains(string(data), token) {
			out = append(out, pid)
		}
	}
	return out
}
