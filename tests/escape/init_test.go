package escape

import (
	"slices"
	"strings"
	"testing"
)

// reachLine is one line of the probe's init-reach report: one attempt on one task.
type reachLine struct {
	target, role, uid, op, result string
}

// reachLines parses the detail of an init-reach report; it fails the test on a malformed line or
// when the probe lost its parent.
func reachLines(t *testing.T, r report) []reachLine {
	t.Helper()
	lines := strings.Split(r.Detail, "\n")
	if last := lines[len(lines)-1]; last != "parent 1 afterwards" && !strings.HasPrefix(last, "parent ") {
		t.Fatalf("init-reach: no parent line in %q", r.Detail)
	}
	var out []reachLine
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		if len(f) != 5 || !strings.HasPrefix(f[2], "uid=") {
			t.Fatalf("init-reach: malformed line %q", l)
		}
		out = append(out, reachLine{f[0], f[1], strings.TrimPrefix(f[2], "uid="), f[3], f[4]})
	}
	return out
}

// signalOps are the attempts that only send a signal.
var signalOps = []string{"signal", "kill"}

// TestInitReach: the sandbox's init is the probe's parent, PID 1 of its PID namespace, and shares
// its mount namespace. It forks the probe from one thread, confined exactly as the probe is (the
// program's uid, no capabilities, the same Landlock domain and seccomp filter, no_new_privs); its
// other threads run the Go runtime, and may keep what the init started with (root in the
// sandbox's namespaces, or on a root host without a user namespace, root itself). The probe tries
// to reach into the init and each of its threads: PTRACE_SEIZE, /proc/1[/task/TID]/{mem, environ,
// root, cwd, fd, ns/mnt}, and signals (tgkill). Every attempt on another thread must fail, and so
// must every attempt but the signals on the forking thread and on the process (the signals are
// the kernel's to judge there: that thread shares the probe's uid and Landlock domain, and a PID
// namespace's init drops signals it has no handler for, SIGKILL always); the init must survive.
//
// Positive controls: the same attempts on a child of the probe's own get through, sandboxed (but
// ptrace, refused by the seccomp filter) and with the sandbox off.
func TestInitReach(t *testing.T) {
	s := newSuite(t)
	t.Run("init", func(t *testing.T) {
		r := callOn(t, s.h, "ro", s.ro, "init-reach", "1")
		t.Logf("init-reach 1 → %s:\n%s", r.Result, r.Detail)
		lines := reachLines(t, r)
		// Through the zygote, PID 1 is a raw clone of it that forks nothing: the probe's parent is
		// a zygote thread outside the PID namespace (parent 0), PID 1 has one thread, and it
		// survived if the call returned (its end ends the namespace, the probe with it).
		zygote := strings.HasSuffix(r.Detail, "parent 0 afterwards")
		if !strings.HasSuffix(r.Detail, "parent 1 afterwards") && !zygote {
			t.Errorf("the init did not survive the attempts: %q", r.Detail)
		}
		roles := map[string]map[string]bool{}
		for _, l := range lines {
			if roles[l.role] == nil {
				roles[l.role] = map[string]bool{}
			}
			roles[l.role][l.target] = true
			may := (l.role != "thread" || zygote) && slices.Contains(signalOps, l.op)
			if l.result == "ok" && !may {
				t.Errorf("escape: %s (%s, uid %s): %s got through", l.target, l.role, l.uid, l.op)
			}
		}
		if zygote && (len(roles["forker"]) != 0 || len(roles["process"]) != 1) {
			t.Errorf("want PID 1's process and no forking thread, got %v", roles)
		}
		if !zygote && (len(roles["forker"]) != 1 || len(roles["thread"]) == 0 || len(roles["process"]) != 1) {
			t.Errorf("want the process, one forking thread and at least one other thread, got %v", roles)
		}
	})
	for _, c := range []struct {
		name        string
		unsandboxed bool
	}{{"control/child", false}, {"control/child-unsandboxed", true}} {
		t.Run(c.name, func(t *testing.T) {
			h := s.h
			if c.unsandboxed {
				h = s.off
			}
			r := callOn(t, h, "ro", s.ro, "init-reach", "child")
			t.Logf("init-reach child → %s:\n%s", r.Result, r.Detail)
			done := map[string]bool{} // ptrace and kill got through once: the child is traced, or gone
			for _, l := range reachLines(t, r) {
				switch {
				case l.op == "ptrace" && !c.unsandboxed:
					if l.result != "EPERM" {
						t.Errorf("%s: ptrace got %s, want the seccomp filter's EPERM", l.target, l.result)
					}
				case done[l.op]:
				case l.result != "ok":
					t.Errorf("control: %s (%s): %s failed with %s", l.target, l.role, l.op, l.result)
				}
				done[l.op] = done[l.op] || l.result == "ok"
			}
		})
	}
}
