package escape

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/egress"
	"golang.org/x/sys/unix"
)

// denyRaceCalls bounds TestDenyPathRemovedBeforeInit: how many calls race the toggler. In the
// attack review (issue 10), about one call in ten won the race on today's code.
const denyRaceCalls = 300

// TestDenyPathRemovedBeforeInit is a race between the policy check and the masks, found in the
// attack review of issue 10: a mandatory deny path inside a writable tree (here .vscode, whose
// tasks.json VS Code runs on folder open) exists when sandbox.Compile looks, so it is to be masked
// and is not in the policy's Absent list (the paths the post-call sweep removes); a concurrent
// writer of the workspace (another call with a write grant, played here by a goroutine on the
// host) removes it before the sandbox's init opens it; the init skips a deny path it cannot find
// (openPlan: ENOENT), so the call runs with .vscode neither masked nor swept, creates
// .vscode/tasks.json, and it stays on the host after the call. The same holds for every deny path
// (.git/hooks, .git/config, fs.deny entries). Reproduced with two real concurrent calls (one
// toggling .vscode, one planting) as well.
//
// The assertion: after each call returns, no .vscode/tasks.json the call wrote is on the host.
// Positive control: without the toggler, a call planting into a missing .vscode gets its write
// swept (the existing persist/vscode-tasks-missing-dir case), and into an existing .vscode is
// refused by the mask.
func TestDenyPathRemovedBeforeInit(t *testing.T) {
	s := newSuite(t)
	ws := fixture.Workspace(t)
	vscode := filepath.Join(ws, ".vscode")
	tasks := filepath.Join(vscode, "tasks.json")
	b, err := s.h.Bundle("rw")
	must(t, err)
	call := func() host.Envelope {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		input := map[string]any{"case": "plant", "args": []any{tasks}}
		return s.h.Call(ctx, b, "run", input, host.Caller{Workspace: ws, User: "escape"}, host.CallOptions{})
	}

	// Controls: an existing .vscode is masked (the write fails, EROFS); a missing one is swept.
	must(t, os.Mkdir(vscode, 0o755))
	fixture.GiveToAgent(t, ws)
	r := callOn(t, s.h, "rw", ws, "plant", tasks)
	denied("write", "EROFS").check(t, r)
	must(t, os.Remove(vscode))
	r = callOn(t, s.h, "rw", ws, "plant", tasks)
	want{result: "allowed"}.check(t, r)
	if _, err := os.Lstat(vscode); err == nil {
		t.Fatalf("control: %s was not swept after the call", vscode)
	}

	stop := make(chan struct{})
	var toggler sync.WaitGroup
	toggler.Add(1)
	go func() {
		defer toggler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if os.Mkdir(vscode, 0o755) == nil {
				os.Lchown(vscode, fixture.AgentID, fixture.AgentID)
			}
			time.Sleep(300 * time.Microsecond)
			os.Remove(vscode) // fails once the call has planted tasks.json: it stays
			time.Sleep(300 * time.Microsecond)
		}
	}()
	var escapes, refused atomic.Int64
	for range denyRaceCalls {
		env := call()
		if !env.OK {
			refused.Add(1) // the init found the tree changed, or the mask target gone
		}
		if _, err := os.Lstat(tasks); err == nil {
			escapes.Add(1)
			os.RemoveAll(vscode)
		}
	}
	close(stop)
	toggler.Wait()
	t.Logf("%d calls, %d refused, %d left .vscode/tasks.json on the host", denyRaceCalls, refused.Load(), escapes.Load())
	if n := escapes.Load(); n > 0 {
		t.Errorf("escape: %d of %d calls left %s on the host (a deny path removed between the policy check and the init is neither masked nor swept)", n, denyRaceCalls, tasks)
	}
}

// TestCoreLimitHard (attack review of issue 10): a CLI can raise RLIMIT_CORE to the hard limit it
// inherits (unlimited) and dump core. The core lands in the workspace (bounded by RLIMIT_FSIZE)
// or, on hosts whose core_pattern is a pipe (systemd-coredump, apport), is handed with the CLI's
// memory to a root helper outside the sandbox. The sandbox should set the hard limit to 0.
func TestCoreLimitHard(t *testing.T) {
	s := newSuite(t)
	r := callOn(t, s.h, "rw", s.rw, "rlimit-core")
	want{result: "denied", step: "getrlimit", detail: "hard core limit 0"}.check(t, r)
}

// TestProxyConnectionsPerCall (attack review of issue 10): the egress listeners of a call are
// served by the host process (clihostd), and a connection to the HTTP proxy costs it a
// descriptor and a goroutine for as long as the CLI keeps it open, with no per-call bound but the
// call's processes × RLIMIT_NOFILE (256 × 1024 by default). One call of a bundle with egress, with
// no exec grant (it forks), can so exhaust clihostd's descriptor table: every other call, the
// control socket and the MCP listener then fail (accept: EMFILE) until the call ends. Observed
// against clihostd (RLIMIT_NOFILE 20000): 30 processes × 1000 connections filled it, two calls
// through the control socket hung for more than 10 s, and the daemon's RSS grew by about 10 KiB a
// connection (uncharged to the call's memory limit).
//
// The test lowers this process's (the host's) soft RLIMIT_NOFILE to what it has open plus 4096,
// has one call of the net bundle hold up to 100 × 1000 proxy connections, and meanwhile makes an
// ordinary call, which must succeed.
func TestProxyConnectionsPerCall(t *testing.T) {
	s := newSuite(t)
	// open counts this process's descriptors; -1 when it cannot open one to count them (EMFILE).
	open := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return -1
		}
		return len(ents)
	}
	var old unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	base := open()
	lowered := old
	lowered.Cur = uint64(base + 4096)
	if lowered.Cur > old.Max {
		fixture.Missing(t, "the hard RLIMIT_NOFILE %d is too low for this test", old.Max)
	}
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered))
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })

	// Positive control: the ordinary call works before the flood.
	allowed("hello from the workspace").check(t, callOn(t, s.h, "ro", s.ro, "read", filepath.Join(s.ro, "hello.txt")))

	done := make(chan report, 1)
	go func() { done <- callOn(t, s.h, "net", s.empty, "proxy-conns", "100", "1000", "6000") }()
	peak := 0
	for range 80 { // up to 4 s for the flood to build up
		n := open()
		if n < 0 {
			peak = int(lowered.Cur)
			break
		}
		peak = max(peak, n)
		if peak >= base+4000 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := s.h.Bundle("ro")
	must(t, err)
	env := s.h.Call(ctx, b, "run", map[string]any{"case": "read", "args": []any{filepath.Join(s.ro, "hello.txt")}},
		host.Caller{Workspace: s.ro, User: "escape"}, host.CallOptions{})
	r := <-done
	t.Logf("host descriptors: %d before, %d at the peak (soft limit %d); the flood: %s", base, peak, lowered.Cur, r.Detail)
	// The flood must have been held while the ordinary call ran, or its success proves nothing:
	// the proxy accepts (and the host holds a descriptor for) up to egress.DefaultMaxConns of the
	// call's connections, which the children keep open until the call ends. The peak is sampled
	// every 50 ms and connections come and go at the cap, so half the cap is the bound (a flood
	// that never built up stays near 0; CI saw 126 of 128 once).
	if r.Result != "allowed" || peak-base < egress.DefaultMaxConns/2 {
		t.Errorf("the flood did not build up: %d host descriptors at the peak over %d before, want at least %d more; the flood: %+v", peak, base, egress.DefaultMaxConns/2, r)
	}
	if !env.OK {
		t.Errorf("while one call held proxy connections, another call failed: %+v", env.Error)
	}
}

// TestBundleInWritableWorkspace (attack review of issue 10): bundles usually live in the project
// (.cli/, the default bundle directory and the layout docs/authoring.md shows), that is, inside
// the workspace a tool may write. Nothing masks the bundle directories, so a tool with fs.write on
// the workspace rewrites its own CLI.md, and the next call (after clihostd's reload on the
// change, or the next clihostctl run) runs under the sandbox the tool chose: here it grants
// itself a file outside the workspace (in the attack, ~/.gitconfig: code execution at the user's
// next git command). The rewrite must be refused. Positive control: the same call writes an
// ordinary file of the workspace.
func TestBundleInWritableWorkspace(t *testing.T) {
	requireCorpus(t)
	ws := fixture.Workspace(t)
	const grant = `write: ["./**"]`
	sb := `
  network: { egress: [] }
  fs: { read: ["./**"], ` + grant + ` }
  exec: { allow: false }
  env: { pass: [] }`
	write(t, filepath.Join(ws, ".cli"), probeFiles("selfedit", sb))
	write(t, ws, map[string]string{"ordinary.txt": "ordinary\n"})
	fixture.GiveToAgent(t, ws)
	load := func() *host.Host {
		return host.New(fixture.Load(t, filepath.Join(ws, ".cli")), host.Options{LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return probeDir + ":/usr/bin:/bin", true
			}
			return "", false
		}})
	}
	h := load()
	allowed("").check(t, callOn(t, h, "selfedit", ws, "write", filepath.Join(ws, "ordinary.txt")))

	// A file outside every grant that the agent uid owns (as ~/.gitconfig is the user's).
	victim, err := os.MkdirTemp(outside, "victim-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(victim) })
	target := filepath.Join(victim, "gitconfig")
	write(t, victim, map[string]string{"gitconfig": "[user]\n\tname = victim\n"})
	must(t, os.Chmod(victim, 0o755))
	fixture.GiveToAgent(t, victim)
	manifest := filepath.Join(ws, ".cli", "selfedit", "CLI.md")
	r := callOn(t, h, "selfedit", ws, "replace", manifest, grant, `write: ["./**", "`+target+`"]`)
	if r.Result == "denied" && (r.Errno == "EROFS" || r.Errno == "EACCES") {
		return
	}
	// The rewrite went through: show what it gives the next call.
	r2 := callOn(t, load(), "selfedit", ws, "write", target)
	t.Errorf("a call rewrote its own bundle's CLI.md (%+v); the next call, under the sandbox it chose, wrote %s outside the workspace: %+v", r, target, r2)
}

// TestDenyOverBudget (attack review of issue 10): sandbox.Compile used to expand deny globs
// (fs.deny "**/.env") and search writable roots for nested git directories within a budget, and
// past it left the rest to a Policy.DenyGlobs list that nothing enforced: denied files became
// readable and writable, and a nested repository's .git/hooks writable. A workspace past such a
// budget is common (node_modules). Now deny globs are expanded completely (up to 1,000,000 entries
// read) or the call is refused, and the git rule checks nested repositories after the call. With
// 100,500 entries before them, reading zzz/.env gets nothing and writing
// zzz/repo/.git/hooks/pre-commit fails.
func TestDenyOverBudget(t *testing.T) {
	s := newSuite(t)
	ws := fixture.Workspace(t)
	write(t, ws, map[string]string{
		"zzz/.env":                  "TOKEN=denied-by-glob\n",
		"zzz/repo/.git/HEAD":        "ref: refs/heads/main\n",
		"zzz/repo/.git/config":      "[core]\n\trepositoryformatversion = 0\n",
		"zzz/repo/.git/hooks/.keep": "",
	})
	// 100500 empty files, walked before zzz.
	must(t, os.Mkdir(filepath.Join(ws, "aaa"), 0o755))
	for i := range 100500 {
		f, err := os.Create(filepath.Join(ws, "aaa", "f"+itoa(i)))
		must(t, err)
		f.Close()
	}
	fixture.GiveToAgent(t, ws)
	call := func(id, probeCase string, args ...any) (host.Envelope, report) {
		b, err := s.h.Bundle(id)
		must(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		env := s.h.Call(ctx, b, "run", map[string]any{"case": probeCase, "args": args}, host.Caller{Workspace: ws, User: "escape"}, host.CallOptions{})
		var r report
		if env.OK {
			raw, _ := json.Marshal(env.Value)
			must(t, json.Unmarshal(raw, &r))
		}
		return env, r
	}
	// 100,500 entries are within the walk bound: the glob is expanded completely and the denied
	// file is masked (it reads as empty), so the call runs and reads nothing.
	env, r := call("ro", "read", filepath.Join(ws, "zzz", ".env"))
	if !env.OK || r.Result != "allowed" || r.Detail != "" {
		t.Errorf("fs.deny **/.env over the budget: ok=%v %+v %v, want the call to run and read nothing", env.OK, r, env.Error)
	}
	hook := filepath.Join(ws, "zzz", "repo", ".git", "hooks", "pre-commit")
	env, r = call("rw", "write", hook)
	if !env.OK || r.Result != "denied" || r.Errno != "EROFS" {
		t.Errorf("write the nested hook: ok=%v %+v %v, want the call to run and the write to fail with EROFS", env.OK, r, env.Error)
	}
	if _, err := os.Stat(hook); err == nil {
		t.Errorf("a nested repository's hook was written past the budget: %s", hook)
	}
}
