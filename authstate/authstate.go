// Package authstate drives a bundle's authentication state machine (AIP-29 §Auth and its ADAPTER):
//
//	unknown ──check──▶ unauthed ──login──▶ logging_in ──completes_when ok──▶ authed
//	                      ▲                    │ fails, times out, cancelled     │ refresh ok: stays
//	                      └────────────────────┴──── expiry / refresh failure ◀──┘
//
// State is kept per Scope (bundle id@major, workspace, user) in the store's auth bucket. Every
// transition is exactly one store transaction (store.Update), so a process killed at any point
// keeps the last transition it completed. Commands (login.completes_when, refresh) run without a
// shell through package runner; login.cmd itself is handed to the caller, who decides where it runs
// (the user's terminal for an interactive login).
package authstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/store"
)

// Phase is a state of the machine.
type Phase string

// The phases.
const (
	Unknown   Phase = "unknown"    // never checked (or the state was lost)
	Unauthed  Phase = "unauthed"   // calls get auth_required
	LoggingIn Phase = "logging_in" // a login is in progress; calls get auth_required
	Authed    Phase = "authed"     // calls run
)

// Defaults for the commands the machine runs and for Login's wait.
const (
	// CheckTimeout bounds one run of login.completes_when.cmd.
	CheckTimeout = 30 * time.Second
	// RefreshTimeout bounds one run of refresh.cmd.
	RefreshTimeout = 60 * time.Second
	// DefaultLoginWait is how long Login polls completes_when after login.cmd returns, when
	// Machine.LoginWait is 0.
	DefaultLoginWait = 2 * time.Minute
	// PollInterval is the time between two completes_when checks while Login waits.
	PollInterval = time.Second
)

// AuditExpired is the type of the audit record Expired emits.
const AuditExpired = "cli.auth_expired"

// State is a scope's authentication state.
type State struct {
	Phase       Phase     `json:"phase"`
	Since       time.Time `json:"since,omitzero"`        // when Phase was entered
	LastRefresh time.Time `json:"last_refresh,omitzero"` // last successful login or refresh
	LastCheck   time.Time `json:"last_check,omitzero"`   // last completes_when verdict
	Reason      string    `json:"reason,omitempty"`      // why the phase is what it is (never a secret)
}

// ExpiredEvent is the audit record of a mid-flight expiry (ADAPTER §Audit).
type ExpiredEvent struct {
	Type   string    `json:"type"` // AuditExpired
	CLIID  string    `json:"cli_id"`
	UserID string    `json:"user_id"`
	TS     time.Time `json:"ts"`
}

// Machine runs the state machine over a store. It is safe for concurrent use: each transition is
// read-modify-written in one store transaction.
type Machine struct {
	Store *store.Store
	// Now is the clock for state timestamps and refresh cadence; nil means time.Now.
	Now func() time.Time
	// Audit receives an ExpiredEvent when Expired matches; nil drops it.
	Audit func(v any)
	// LoginWait is how long Login polls completes_when after login.cmd returns; 0 means
	// DefaultLoginWait.
	LoginWait time.Duration
}

func (m *Machine) now() time.Time {
	if m.Now != nil {
		return m.Now().UTC()
	}
	return time.Now().UTC()
}

// auth validates s against b and returns b's auth block (nil when it declares none).
func auth(b *manifest.Bundle, s lifecycle.Scope) (*manifest.Auth, error) {
	if err := s.Validate(b); err != nil {
		return nil, fmt.Errorf("authstate: %w", err)
	}
	return b.CLI.Auth, nil
}

// noAuth is the state of a bundle without an auth block: always authed, nothing to do.
func noAuth() State { return State{Phase: Authed, Reason: "the bundle declares no auth"} }

// Get returns the stored state: Authed for a bundle without an auth block, Unknown when nothing is
// stored yet.
func (m *Machine) Get(b *manifest.Bundle, s lifecycle.Scope) (State, error) {
	a, err := auth(b, s)
	if err != nil || a == nil {
		return noAuth(), err
	}
	var st State
	_, ok, err := m.Store.Get(store.BucketAuth, s.Key(), &st)
	if err != nil {
		return State{Phase: Unknown}, fmt.Errorf("authstate: %s: %w", b.Key(), err)
	}
	if !ok {
		return State{Phase: Unknown}, nil
	}
	return st, nil
}

// transition applies fn to the stored state in one store transaction and returns the result. Since
// moves to now when the phase changes.
func (m *Machine) transition(s lifecycle.Scope, fn func(st *State, now time.Time)) (State, error) {
	now := m.now()
	var out State
	_, err := m.Store.Update(store.BucketAuth, s.Key(), func(cur store.Record) (any, error) {
		st := State{Phase: Unknown}
		if cur.Version > 0 {
			if err := json.Unmarshal(cur.Data, &st); err != nil {
				return nil, fmt.Errorf("decode auth state: %w", err)
			}
		}
		prev := st.Phase
		fn(&st, now)
		if st.Phase != prev {
			st.Since = now
		}
		out = st
		return st, nil
	})
	if err != nil {
		return State{}, fmt.Errorf("authstate: %s: %w", s.Bundle, err)
	}
	return out, nil
}

// setPhase is a transition to phase with reason.
func (m *Machine) setPhase(s lifecycle.Scope, phase Phase, reason string) (State, error) {
	return m.transition(s, func(st *State, _ time.Time) {
		st.Phase, st.Reason = phase, reason
	})
}

// authed is the transition of a confirmed login: the credential counts as fresh.
func (m *Machine) authed(s lifecycle.Scope, reason string) (State, error) {
	return m.transition(s, func(st *State, now time.Time) {
		st.Phase, st.Reason, st.LastRefresh, st.LastCheck = Authed, reason, now, now
	})
}

// errInconclusive marks a completes_when run that gave no verdict (timeout, signal): worth retrying.
var errInconclusive = errors.New("no verdict")

// probe runs login.completes_when and reports whether it says "logged in". With no completes_when
// it says yes: nothing can be checked, so the CLI is presumed logged in.
func probe(ctx context.Context, b *manifest.Bundle, a *manifest.Auth, env lifecycle.Env, timeout time.Duration) (ok bool, reason string, err error) {
	if a.Login == nil || a.Login.CompletesWhen == nil || a.Login.CompletesWhen.Cmd == "" {
		return true, "no auth.login.completes_when: presumed logged in", nil
	}
	cw := a.Login.CompletesWhen
	res, err := runLine(ctx, b, env, cw.Cmd, timeout)
	if err != nil {
		return false, "", fmt.Errorf("completes_when: %w", err)
	}
	if res.ExitCode != cw.ExitCode {
		return false, fmt.Sprintf("%q exited %d; logged in is exit %d", cw.Cmd, res.ExitCode, cw.ExitCode), nil
	}
	return true, "", nil
}

// runLine runs one manifest command line to completion. A run that timed out, was cancelled or died
// of a signal is an error (wrapping errInconclusive, or ctx's error); a non-zero exit is not.
func runLine(ctx context.Context, b *manifest.Bundle, env lifecycle.Env, line string, timeout time.Duration) (runner.Result, error) {
	words, err := argv.Split(line)
	if err != nil {
		return runner.Result{}, err
	}
	c, err := env.Command(b.CLI.Bin, words, timeout)
	if err != nil {
		return runner.Result{}, fmt.Errorf("%q: %w", line, err)
	}
	res, err := env.Run(ctx, c)
	switch {
	case err != nil:
		return res, fmt.Errorf("%q: %w", line, err)
	case res.Canceled:
		return res, fmt.Errorf("%q: stopped: %w", line, context.Cause(ctx))
	case res.TimedOut:
		return res, fmt.Errorf("%q did not finish within %s: %w", line, timeout, errInconclusive)
	case res.Signal != "":
		return res, fmt.Errorf("%q died of %s: %w", line, res.Signal, errInconclusive)
	}
	return res, nil
}

// Check runs login.completes_when and moves to Authed or Unauthed on its verdict. When the check
// gives none (it could not start, timed out, was cancelled), the state is left as it was and the
// error says why.
func (m *Machine) Check(ctx context.Context, b *manifest.Bundle, s lifecycle.Scope, env lifecycle.Env) (State, error) {
	a, err := auth(b, s)
	if err != nil || a == nil {
		return noAuth(), err
	}
	ok, reason, err := probe(ctx, b, a, env, CheckTimeout)
	if err != nil {
		st, gerr := m.Get(b, s)
		return st, errors.Join(fmt.Errorf("authstate: check %s: %w", b.Key(), err), gerr)
	}
	if ok {
		return m.transition(s, func(st *State, now time.Time) {
			st.Phase, st.Reason, st.LastCheck = Authed, reason, now
			if st.LastRefresh.IsZero() {
				st.LastRefresh = now // first sight of a login: refresh cadence counts from here
			}
		})
	}
	return m.transition(s, func(st *State, now time.Time) {
		st.Phase, st.Reason, st.LastCheck = Unauthed, reason, now
	})
}

// Login moves to LoggingIn, hands login.cmd (with the resolved binary as argv[0]) to run, then polls
// completes_when every PollInterval for up to LoginWait and moves to Authed; or back to Unauthed,
// with the reason and an error, when run fails, the check never passes, or ctx is done. Without
// completes_when, run returning nil is the login's success.
func (m *Machine) Login(ctx context.Context, b *manifest.Bundle, s lifecycle.Scope, env lifecycle.Env, run func(ctx context.Context, argv []string) error) (State, error) {
	a, err := auth(b, s)
	if err != nil {
		return State{}, err
	}
	if a == nil || a.Login == nil || a.Login.Cmd == "" {
		st, gerr := m.Get(b, s)
		return st, errors.Join(fmt.Errorf("authstate: %s declares no auth.login.cmd", b.Key()), gerr)
	}
	words, err := argv.Split(a.Login.Cmd)
	if err != nil {
		return State{}, fmt.Errorf("authstate: %s auth.login.cmd: %w", b.Key(), err)
	}
	c, err := env.Command(b.CLI.Bin, words, 0)
	if err != nil {
		return State{}, fmt.Errorf("authstate: %s auth.login.cmd %q: %w", b.Key(), a.Login.Cmd, err)
	}
	if _, err := m.setPhase(s, LoggingIn, "login started"); err != nil {
		return State{}, err
	}
	fail := func(reason string, cause error) (State, error) {
		st, err := m.setPhase(s, Unauthed, reason)
		return st, errors.Join(fmt.Errorf("authstate: login %s: %s: %w", b.Key(), reason, cause), err)
	}
	if err := run(ctx, append([]string{c.Path}, c.Args...)); err != nil {
		if ctx.Err() != nil {
			return fail("login cancelled", err)
		}
		return fail(fmt.Sprintf("%q failed", a.Login.Cmd), err)
	}
	wait := m.LoginWait
	if wait <= 0 {
		wait = DefaultLoginWait
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	last := "not checked yet"
	// ended fails the login when ctx is done: the caller's own wait ending (a deadline) is a login
	// not confirmed, with why the last check failed; anything else is a cancellation.
	ended := func() (State, error) {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fail(fmt.Sprintf("login not confirmed (%s)", last), errors.New("the wait ended"))
		}
		return fail("login cancelled", context.Cause(ctx))
	}
	for {
		ok, reason, err := probe(ctx, b, a, env, min(CheckTimeout, max(time.Until(deadline), PollInterval)))
		if reason != "" {
			last = reason
		} else if err != nil {
			last = err.Error()
		}
		switch {
		case ok:
			return m.authed(s, reason)
		case ctx.Err() != nil:
			return ended()
		case err != nil && !errors.Is(err, errInconclusive):
			return fail("the login check could not run", err)
		case !time.Now().Before(deadline):
			if err != nil {
				reason = err.Error()
			}
			return fail(fmt.Sprintf("login did not complete within %s (%s)", wait, reason), errors.New("login not confirmed"))
		}
		select {
		case <-ctx.Done():
			return ended()
		case <-tick.C:
		}
	}
}

// Logout moves to Unauthed: calls get auth_required until the next Login or Check. It does not
// touch the CLI's own credentials (auth.state).
func (m *Machine) Logout(b *manifest.Bundle, s lifecycle.Scope) error {
	a, err := auth(b, s)
	if err != nil {
		return err
	}
	if a == nil {
		return fmt.Errorf("authstate: %s declares no auth; there is nothing to log out of", b.Key())
	}
	_, err = m.setPhase(s, Unauthed, "logged out")
	return err
}

// every returns refresh.every when the bundle declares a refresh with a cadence.
func every(b *manifest.Bundle, a *manifest.Auth) (time.Duration, bool, error) {
	if a == nil || a.Refresh == nil || a.Refresh.Cmd == "" || a.Refresh.Every == "" {
		return 0, false, nil
	}
	d, err := manifest.ParseISODuration(a.Refresh.Every)
	if err != nil {
		return 0, false, fmt.Errorf("authstate: %s auth.refresh.every: %w", b.Key(), err)
	}
	return d, true, nil
}

// BeforeCall is run before each call and returns the state the call must respect: anything but
// Authed, or an error, means the call gets auth_required. Unknown is resolved by Check. Authed with
// refresh.every elapsed since LastRefresh runs refresh.cmd first: success restarts the cadence,
// failure moves to Unauthed. Unauthed and LoggingIn are returned as they are (a login interrupted
// by a crash stays LoggingIn until the next Login or Check).
func (m *Machine) BeforeCall(ctx context.Context, b *manifest.Bundle, s lifecycle.Scope, env lifecycle.Env) (State, error) {
	st, err := m.Get(b, s)
	if err != nil {
		return st, err
	}
	switch a := b.CLI.Auth; {
	case a == nil:
		return st, nil
	case st.Phase == Unknown:
		return m.Check(ctx, b, s, env)
	case st.Phase == Authed:
		d, ok, err := every(b, a)
		if err != nil || !ok || m.now().Sub(st.LastRefresh) < d {
			return st, err
		}
		return m.refresh(ctx, b, s, env, a.Refresh.Cmd)
	}
	return st, nil
}

// refresh runs refresh.cmd. A cancelled ctx leaves the state alone.
func (m *Machine) refresh(ctx context.Context, b *manifest.Bundle, s lifecycle.Scope, env lifecycle.Env, line string) (State, error) {
	res, err := runLine(ctx, b, env, line, RefreshTimeout)
	if ctx.Err() != nil {
		st, gerr := m.Get(b, s)
		return st, errors.Join(fmt.Errorf("authstate: refresh %s: %w", b.Key(), context.Cause(ctx)), gerr)
	}
	if err == nil && res.ExitCode == 0 {
		return m.transition(s, func(st *State, now time.Time) { st.LastRefresh = now })
	}
	reason := fmt.Sprintf("refresh %q exited %d", line, res.ExitCode)
	if err != nil {
		reason = "refresh failed: " + err.Error()
	}
	return m.setPhase(s, Unauthed, reason)
}

// Expired checks a call's exit code against auth.expiry.detect ("exit_code:N"). On a match it moves
// to Unauthed, emits an ExpiredEvent to Audit and returns true.
func (m *Machine) Expired(b *manifest.Bundle, s lifecycle.Scope, exitCode int) (bool, error) {
	a, err := auth(b, s)
	if err != nil || a == nil || a.Expiry == nil || a.Expiry.Detect == "" {
		return false, err
	}
	n, ok := strings.CutPrefix(a.Expiry.Detect, "exit_code:")
	code, cerr := strconv.Atoi(n)
	if !ok || cerr != nil {
		return false, fmt.Errorf("authstate: %s auth.expiry.detect %q is not exit_code:N", b.Key(), a.Expiry.Detect)
	}
	if exitCode != code {
		return false, nil
	}
	if _, err := m.setPhase(s, Unauthed, fmt.Sprintf("a call exited %d, the CLI's expiry signal (%s)", exitCode, a.Expiry.Detect)); err != nil {
		return true, err
	}
	if m.Audit != nil {
		m.Audit(ExpiredEvent{Type: AuditExpired, CLIID: b.ID(), UserID: s.User, TS: m.now()})
	}
	return true, nil
}

// Due returns how long until the scope's next refresh is due (0 when overdue), for a background
// scheduler; false when no refresh applies (no refresh cadence, not Authed, or the state is
// unreadable).
func (m *Machine) Due(b *manifest.Bundle, s lifecycle.Scope) (time.Duration, bool) {
	a, err := auth(b, s)
	if err != nil {
		return 0, false
	}
	d, ok, err := every(b, a)
	if err != nil || !ok {
		return 0, false
	}
	st, err := m.Get(b, s)
	if err != nil || st.Phase != Authed {
		return 0, false
	}
	return max(st.LastRefresh.Add(d).Sub(m.now()), 0), true
}
