package authstate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	fx "github.com/clihost/clihost/internal/fixture"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/store"
)

// fakecli is the fixture CLI: every run appends its argv as a line to $FAKE_DIR/log; "status" exits
// 0 when the flag file $FAKE_DIR/loggedin exists (else 1), "refresh" fails when $FAKE_DIR/refresh-fails
// exists, "hang" sleeps.
const fakecli = `#!/bin/sh
echo "$*" >> "$FAKE_DIR/log"
case "$1" in
status) test -f "$FAKE_DIR/loggedin" ;;
refresh) test ! -f "$FAKE_DIR/refresh-fails" ;;
hang) sleep 60 ;;
esac
`

type fixture struct {
	t   *testing.T
	dir string
	m   *Machine
	b   *manifest.Bundle
	s   lifecycle.Scope
	env lifecycle.Env
	now time.Time
	mu  sync.Mutex
	ctx context.Context
}

func newFixture(t *testing.T, a *manifest.Auth) *fixture {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakecli")
	if err := os.WriteFile(bin, []byte(fakecli), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "state"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{t: t, dir: dir, now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), ctx: context.Background()}
	f.m = &Machine{Store: st, Now: f.clock}
	f.b = &manifest.Bundle{CLI: &manifest.CLI{ID: "fake", Version: "2.0.1", Bin: "fakecli", Auth: a}}
	f.s = lifecycle.Scope{Bundle: "fake@2", Workspace: "/ws", User: "u_abc"}
	f.env = lifecycle.Env{BinPath: bin, Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "FAKE_DIR=" + dir}}
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fixture) flag(name string, on bool) {
	p := filepath.Join(f.dir, name)
	if !on {
		_ = os.Remove(p)
		return
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		f.t.Error(err)
	}
}

func (f *fixture) log() []string {
	raw, err := os.ReadFile(filepath.Join(f.dir, "log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// expect returns a checker of a (State, error) result: no error, the phase, and the same state
// stored.
func (f *fixture) expect(phase Phase) func(State, error) State {
	return func(st State, err error) State {
		f.t.Helper()
		if err != nil {
			f.t.Fatalf("error: %v (state %+v)", err, st)
		}
		if st.Phase != phase {
			f.t.Fatalf("phase %q (%s), want %q", st.Phase, st.Reason, phase)
		}
		got, err := f.m.Get(f.b, f.s)
		if err != nil || got != st {
			f.t.Fatalf("stored state %+v %v, returned %+v", got, err, st)
		}
		return st
	}
}

func ghAuth() *manifest.Auth {
	return &manifest.Auth{
		Login: &manifest.Login{Cmd: "fakecli login --web", Interactive: true,
			CompletesWhen: &manifest.ExitCheck{Cmd: "fakecli status"}},
		Refresh: &manifest.Refresh{Cmd: "fakecli refresh -s repo", Every: "PT1H"},
		Expiry:  &manifest.Expiry{Detect: "exit_code:4"},
	}
}

func TestNoAuthBlock(t *testing.T) {
	f := newFixture(t, nil)
	for _, get := range []func() (State, error){
		func() (State, error) { return f.m.Get(f.b, f.s) },
		func() (State, error) { return f.m.BeforeCall(f.ctx, f.b, f.s, f.env) },
		func() (State, error) { return f.m.Check(f.ctx, f.b, f.s, f.env) },
	} {
		if st, err := get(); err != nil || st.Phase != Authed {
			t.Fatalf("state %+v %v", st, err)
		}
	}
	if ok, err := f.m.Expired(f.b, f.s, 4); ok || err != nil {
		t.Fatalf("Expired = %v %v", ok, err)
	}
	if _, ok := f.m.Due(f.b, f.s); ok {
		t.Fatal("Due without auth")
	}
	if err := f.m.Logout(f.b, f.s); err == nil {
		t.Fatal("Logout without auth succeeded")
	}
	if _, err := f.m.Login(f.ctx, f.b, f.s, f.env, func(context.Context, []string) error { return nil }); err == nil {
		t.Fatal("Login without auth.login succeeded")
	}
	if f.log() != nil {
		t.Fatal("something ran")
	}
}

func TestCheckAndBeforeCall(t *testing.T) {
	f := newFixture(t, ghAuth())
	f.expect(Unknown)(f.m.Get(f.b, f.s))
	// unknown → Check → unauthed; BeforeCall does not re-check an unauthed scope.
	st := f.expect(Unauthed)(f.m.BeforeCall(f.ctx, f.b, f.s, f.env))
	if !strings.Contains(st.Reason, `"fakecli status" exited 1`) || !st.LastCheck.Equal(f.now) || !st.Since.Equal(f.now) {
		t.Fatalf("state %+v", st)
	}
	f.expect(Unauthed)(f.m.BeforeCall(f.ctx, f.b, f.s, f.env))
	if got := f.log(); !slices.Equal(got, []string{"status"}) {
		t.Fatalf("log = %q", got)
	}
	// Logged in out of band: an explicit Check sees it.
	f.flag("loggedin", true)
	f.advance(time.Minute)
	st = f.expect(Authed)(f.m.Check(f.ctx, f.b, f.s, f.env))
	if !st.LastRefresh.Equal(f.now) || !st.Since.Equal(f.now) || st.Reason != "" {
		t.Fatalf("state %+v", st)
	}
	// A check that gives no verdict leaves the state alone.
	f.b.CLI.Auth.Login.CompletesWhen.Cmd = "fakecli hang"
	ctx, cancel := context.WithTimeout(f.ctx, 200*time.Millisecond)
	defer cancel()
	st, err := f.m.Check(ctx, f.b, f.s, f.env)
	if err == nil || st.Phase != Authed {
		t.Fatalf("inconclusive check: %+v %v", st, err)
	}
	f.b.CLI.Auth.Login.CompletesWhen.Cmd = "other status"
	if _, err := f.m.Check(f.ctx, f.b, f.s, f.env); err == nil || !strings.Contains(err.Error(), "not the bundle's bin") {
		t.Fatalf("a check running another program: %v", err)
	}
	f.expect(Authed)(f.m.Get(f.b, f.s))
	// Scopes are separate, and a scope must belong to the bundle.
	other := f.s
	other.Workspace = "/other"
	if st, _ := f.m.Get(f.b, other); st.Phase != Unknown {
		t.Fatalf("other scope %+v", st)
	}
	if _, err := f.m.Get(f.b, lifecycle.Scope{Bundle: "fake@3"}); err == nil {
		t.Fatal("a scope of another major was accepted")
	}
}

func TestLoginPollsCompletesWhen(t *testing.T) {
	f := newFixture(t, ghAuth())
	var got []string
	var during State
	st := f.expect(Authed)(f.m.Login(f.ctx, f.b, f.s, f.env, func(_ context.Context, argv []string) error {
		got = argv
		during, _ = f.m.Get(f.b, f.s)
		// The CLI's login finishes in the background a little after the command returns.
		time.AfterFunc(1200*time.Millisecond, func() { f.flag("loggedin", true) })
		return nil
	}))
	if want := []string{f.env.BinPath, "login", "--web"}; !slices.Equal(got, want) {
		t.Fatalf("login argv = %q, want %q", got, want)
	}
	if during.Phase != LoggingIn {
		t.Fatalf("phase during login = %q", during.Phase)
	}
	if !st.LastRefresh.Equal(f.now) || !st.LastCheck.Equal(f.now) {
		t.Fatalf("state %+v", st)
	}
	if n := len(f.log()); n < 2 {
		t.Fatalf("completes_when ran %d times; the flag flipped after the first", n)
	}
}

func TestLoginFailures(t *testing.T) {
	f := newFixture(t, ghAuth())
	f.m.LoginWait = 1500 * time.Millisecond
	ok := func(context.Context, []string) error { return nil }
	st, err := f.m.Login(f.ctx, f.b, f.s, f.env, ok)
	if err == nil || st.Phase != Unauthed || !strings.Contains(st.Reason, "login did not complete within 1.5s") {
		t.Fatalf("never confirmed: %+v %v", st, err)
	}
	st, err = f.m.Login(f.ctx, f.b, f.s, f.env, func(context.Context, []string) error { return errors.New("exit status 2") })
	if err == nil || st.Phase != Unauthed || !strings.Contains(st.Reason, `"fakecli login --web" failed`) || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("login command failed: %+v %v", st, err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.m.LoginWait = time.Minute
	st, err = f.m.Login(ctx, f.b, f.s, f.env, func(context.Context, []string) error {
		time.AfterFunc(300*time.Millisecond, cancel)
		return nil
	})
	if err == nil || st.Phase != Unauthed || st.Reason != "login cancelled" {
		t.Fatalf("cancelled: %+v %v", st, err)
	}
	f.expect(Unauthed)(f.m.Get(f.b, f.s))
	// The caller's own wait (clihostctl login --wait) ending is not a cancellation: the reason says
	// the login was not confirmed, and why the last check failed.
	ctx, cancel = context.WithTimeout(f.ctx, 300*time.Millisecond)
	defer cancel()
	st, err = f.m.Login(ctx, f.b, f.s, f.env, ok)
	if err == nil || st.Phase != Unauthed || !strings.HasPrefix(st.Reason, "login not confirmed (") ||
		!strings.Contains(st.Reason, "exited 1; logged in is exit 0") || !strings.HasSuffix(err.Error(), "): the wait ended") {
		t.Fatalf("the caller's wait ended: %+v %v", st, err)
	}
	// Without completes_when the login command's success is the login's.
	f.b.CLI.Auth.Login.CompletesWhen = nil
	f.expect(Authed)(f.m.Login(f.ctx, f.b, f.s, f.env, ok))
	f.b.CLI.Auth.Login.Cmd = "fakecli login $TOKEN"
	if _, err := f.m.Login(f.ctx, f.b, f.s, f.env, ok); err == nil {
		t.Fatal("a login.cmd needing a shell was accepted")
	}
}

func TestRefresh(t *testing.T) {
	f := newFixture(t, ghAuth())
	f.flag("loggedin", true)
	st := f.expect(Authed)(f.m.BeforeCall(f.ctx, f.b, f.s, f.env))
	loggedIn := st.LastRefresh
	if d, ok := f.m.Due(f.b, f.s); !ok || d != time.Hour {
		t.Fatalf("Due = %v %v", d, ok)
	}
	f.advance(30 * time.Minute)
	f.expect(Authed)(f.m.BeforeCall(f.ctx, f.b, f.s, f.env))
	if d, _ := f.m.Due(f.b, f.s); d != 30*time.Minute {
		t.Fatalf("Due = %v", d)
	}
	if got := f.log(); !slices.Equal(got, []string{"status"}) {
		t.Fatalf("refreshed too early: %q", got)
	}
	f.advance(31 * time.Minute)
	if d, ok := f.m.Due(f.b, f.s); !ok || d != 0 {
		t.Fatalf("overdue Due = %v %v", d, ok)
	}
	st = f.expect(Authed)(f.m.BeforeCall(f.ctx, f.b, f.s, f.env))
	if got := f.log(); !slices.Equal(got, []string{"status", "refresh -s repo"}) {
		t.Fatalf("log = %q", got)
	}
	if !st.LastRefresh.Equal(f.now) || st.LastRefresh.Equal(loggedIn) || !st.Since.Equal(loggedIn) {
		t.Fatalf("after refresh %+v", st)
	}
	if d, _ := f.m.Due(f.b, f.s); d != time.Hour {
		t.Fatalf("Due after refresh = %v", d)
	}
	// A failing refresh logs the scope out.
	f.flag("refresh-fails", true)
	f.advance(2 * time.Hour)
	st = f.expect(Unauthed)(f.m.BeforeCall(f.ctx, f.b, f.s, f.env))
	if !strings.Contains(st.Reason, `refresh "fakecli refresh -s repo" exited 1`) {
		t.Fatalf("reason %q", st.Reason)
	}
	if _, ok := f.m.Due(f.b, f.s); ok {
		t.Fatal("Due while unauthed")
	}
	f.b.CLI.Auth.Refresh.Every = "PT"
	if _, err := f.m.Check(f.ctx, f.b, f.s, f.env); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.BeforeCall(f.ctx, f.b, f.s, f.env); err == nil {
		t.Fatal("a malformed refresh.every was accepted")
	}
}

func TestExpiredAndLogout(t *testing.T) {
	f := newFixture(t, ghAuth())
	var audit []any
	f.m.Audit = func(v any) { audit = append(audit, v) }
	f.flag("loggedin", true)
	f.expect(Authed)(f.m.Check(f.ctx, f.b, f.s, f.env))
	if ok, err := f.m.Expired(f.b, f.s, 1); ok || err != nil {
		t.Fatalf("exit 1: %v %v", ok, err)
	}
	f.expect(Authed)(f.m.Get(f.b, f.s))
	f.advance(time.Second)
	if ok, err := f.m.Expired(f.b, f.s, 4); !ok || err != nil {
		t.Fatalf("exit 4: %v %v", ok, err)
	}
	st := f.expect(Unauthed)(f.m.Get(f.b, f.s))
	if !strings.Contains(st.Reason, "exit_code:4") {
		t.Fatalf("reason %q", st.Reason)
	}
	want := ExpiredEvent{Type: "cli.auth_expired", CLIID: "fake", UserID: "u_abc", TS: f.now}
	if len(audit) != 1 || audit[0] != want {
		t.Fatalf("audit = %+v, want %+v", audit, want)
	}
	f.expect(Authed)(f.m.Check(f.ctx, f.b, f.s, f.env))
	if err := f.m.Logout(f.b, f.s); err != nil {
		t.Fatal(err)
	}
	if st := f.expect(Unauthed)(f.m.Get(f.b, f.s)); st.Reason != "logged out" {
		t.Fatalf("reason %q", st.Reason)
	}
	f.b.CLI.Auth.Expiry.Detect = "stderr:expired"
	if _, err := f.m.Expired(f.b, f.s, 4); err == nil {
		t.Fatal("a malformed expiry.detect was accepted")
	}
}

// childDirEnv names the state directory of TestDurabilityChild.
const childDirEnv = "CLIHOST_AUTHSTATE_CHILD_DIR"

// durableBundle is the bundle TestDurabilityChild drives: login without completes_when, so a
// Login is two transitions (logging_in, authed) and a Logout one (unauthed), with no process.
func durableBundle() (*manifest.Bundle, lifecycle.Scope) {
	b := &manifest.Bundle{CLI: &manifest.CLI{ID: "dur", Version: "1.0.0", Bin: "dur", Auth: &manifest.Auth{Login: &manifest.Login{Cmd: "dur login"}}}}
	return b, lifecycle.Scope{Bundle: "dur@1", Workspace: "/ws", User: "u"}
}

// TestDurabilityChild is the child of TestKillDurability: it cycles Login and Logout forever,
// printing "ack <version>" after each acknowledged transition, until it is killed.
func TestDurabilityChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("helper process of TestKillDurability")
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &Machine{Store: st}
	b, s := durableBundle()
	env := lifecycle.Env{BinPath: "/nonexistent/dur", Dir: "/"}
	ack := func() {
		rec, _, err := st.Get(store.BucketAuth, s.Key(), nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ack %d\n", rec.Version)
	}
	for {
		if _, err := m.Login(context.Background(), b, s, env, func(context.Context, []string) error {
			ack() // logging_in is acknowledged
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		ack()
		if err := m.Logout(b, s); err != nil {
			t.Fatal(err)
		}
		ack()
	}
}

// TestKillDurability SIGKILLs a process in the middle of a stream of transitions and checks that
// the reopened store holds the last acknowledged transition or the one after it, intact.
func TestKillDurability(t *testing.T) {
	phaseOf := map[uint64]Phase{1: LoggingIn, 2: Authed, 0: Unauthed} // by version mod 3
	for round := range 5 {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestDurabilityChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		child := fx.Start(t, cmd)
		sc := bufio.NewScanner(out)
		var last uint64
		acks := 0
		readAck := func() {
			if v, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				if last, err = strconv.ParseUint(v, 10, 64); err != nil {
					t.Fatal(err)
				}
				acks++
			}
		}
		for acks < 40+round*37 && sc.Scan() {
			readAck()
		}
		time.Sleep(time.Duration(round) * 1300 * time.Microsecond) // land at different points of a commit
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() { // what the child acknowledged before it died
			readAck()
		}
		_ = child.Wait()
		if acks == 0 {
			t.Fatalf("the child acknowledged nothing: %v", sc.Err())
		}
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, s := durableBundle()
		var state State
		rec, ok, err := st.Get(store.BucketAuth, s.Key(), &state)
		st.Close()
		if err != nil || !ok {
			t.Fatalf("round %d: reopened state: %v %v", round, ok, err)
		}
		// Each transition is acknowledged as soon as it commits, so at most one more can have
		// committed after the last acknowledgement.
		if rec.Version < last || rec.Version > last+1 {
			t.Fatalf("round %d: version %d after the last ack %d", round, rec.Version, last)
		}
		t.Logf("round %d: killed after %d acks (last version %d); stored version %d, %s", round, acks, last, rec.Version, state.Phase)
		if want := phaseOf[rec.Version%3]; state.Phase != want {
			t.Fatalf("round %d: version %d has phase %q, want %q", round, rec.Version, state.Phase, want)
		}
	}
}
