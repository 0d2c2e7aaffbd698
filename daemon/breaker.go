package daemon

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/output"
)

// The circuit breaker's defaults (Config.BreakerThreshold, Config.BreakerCooldown).
const (
	DefaultBreakerThreshold = 3
	DefaultBreakerCooldown  = time.Minute
)

// breakers are the circuit breakers of the provider bundles, one per id@major, kept in memory
// while the daemon runs (a reload keeps them; a restart starts them closed). The zero value is
// ready to use.
type breakers struct {
	mu sync.Mutex
	m  map[string]*breaker
	// now is the clock (tests); nil is time.Now.
	now func() time.Time
}

// breaker is one provider's: closed (calls go through) → open after threshold consecutive
// failures (calls refused) → half-open once the cool-down is over (one probe call goes through)
// → closed when the probe succeeds, open again when it fails.
type breaker struct {
	failures  int
	lastError string
	openedAt  time.Time // zero while closed
	retryAt   time.Time
	probing   bool // a half-open probe is in flight
}

func (bs *breakers) clock() time.Time {
	if bs.now != nil {
		return bs.now()
	}
	return time.Now()
}

func (bs *breakers) get(key string) *breaker {
	if bs.m == nil {
		bs.m = map[string]*breaker{}
	}
	b := bs.m[key]
	if b == nil {
		b = &breaker{}
		bs.m[key] = b
	}
	return b
}

// admit says whether a call of key's provider tool may go through now; a refusal is an envelope
// error (provider_unavailable) that says until when. A half-open breaker admits one probe at a
// time; probe reports whether this call is it.
func (bs *breakers) admit(key string) (probe bool, refusal *callresult.Error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.get(key)
	now := bs.clock()
	switch {
	case b.openedAt.IsZero():
		return false, nil
	case now.Before(b.retryAt) || b.probing:
		wait := max(b.retryAt.Sub(now), 0)
		return false, &callresult.Error{Code: errcode.ProviderUnavailable, Category: output.CategoryServer, Fallback: true,
			Message:      fmt.Sprintf("provider %s is unavailable: its last %d calls failed (last: %s); its circuit breaker is open", keyBundle(key), b.failures, b.lastError),
			Hint:         fmt.Sprintf("use another provider; a probe call is let through in %s (clihostctl status shows the breaker)", wait.Round(time.Second)),
			RetryAfterMS: wait.Milliseconds()}
	}
	b.probing = true // the cool-down is over: this call is the half-open probe
	return true, nil
}

// keyBundle is the provider bundle (id@major) a breaker key names (see breakerKey).
func keyBundle(key string) string {
	bundle, _, _ := strings.Cut(key, "\x00")
	return bundle
}

// record counts a call's outcome: failed (the provider failed the call), or neither failed nor
// succeeded (neutral: the host refused it before it ran, the caller cancelled it), which leaves the
// count alone and only ends a probe.
func (bs *breakers) record(key string, probe bool, outcome callOutcome, why string, threshold int, cooldown time.Duration) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.get(key)
	if probe {
		b.probing = false
	}
	switch outcome {
	case outcomeOK:
		*b = breaker{}
	case outcomeFailed:
		b.failures++
		b.lastError = why
		if b.failures >= threshold || !b.openedAt.IsZero() {
			now := bs.clock()
			b.openedAt, b.retryAt = now, now.Add(cooldown)
		}
	}
}

// state is key's breaker as the control API shows it.
func (bs *breakers) state(key string, threshold int, cooldown time.Duration) control.BreakerState {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.get(key)
	s := control.BreakerState{State: control.BreakerClosed, Failures: b.failures, Threshold: threshold,
		CooldownS: int64(cooldown / time.Second), LastError: b.lastError}
	if !b.openedAt.IsZero() {
		opened, retry := b.openedAt.UTC(), b.retryAt.UTC()
		s.OpenedAt, s.RetryAt = &opened, &retry
		s.State = control.BreakerOpen
		if !bs.clock().Before(b.retryAt) {
			s.State = control.BreakerHalfOpen
		}
	}
	return s
}

// callOutcome is what a provider call says about the provider's health.
type callOutcome int

const (
	outcomeNeutral callOutcome = iota // refused before it ran, or cancelled: says nothing
	outcomeOK
	outcomeFailed
)

// providerOutcome judges a call of a provider tool: a process that ran and failed (an exit code,
// a timeout) or succeeded with an error in its output and no answer is a failure, with its
// category; a call the host refused before running anything, or that the caller cancelled, is
// neutral, and so is one the provider refused as invalid input (see failedUnlessInput); the rest
// succeeded.
func providerOutcome(env callresult.Envelope, format string) (callOutcome, string) {
	if e := env.Error; e != nil {
		if e.ExitCode == nil || e.Code == errcode.Cancelled || e.Code == errcode.UsageError {
			return outcomeNeutral, ""
		}
		if e.Code == errcode.Timeout {
			pe := output.ClassifyTimeout(e.PartialStdout, e.Stderr)
			return outcomeFailed, pe.Category
		}
		text := e.Stderr
		if text == "" {
			text = e.Message
		}
		return failedUnlessInput(output.ClassifyProvider(text, *e.ExitCode).Category)
	}
	text, ok := env.Value.(string)
	if !ok {
		return outcomeOK, ""
	}
	r, err := output.ParseProvider(format, []byte(text))
	if err == nil && r.Error != "" && r.Content == "" {
		return failedUnlessInput(output.ClassifyProvider(r.Error, 0).Category)
	}
	return outcomeOK, ""
}

// callerCut says a failed call was stopped at the caller's own limit (timeout, shorter than the
// tool's limit) while the provider was answering or had reported nothing wrong: the caller's
// deadline came first, which says nothing of the provider's health (timeout_ms is input, and no
// input may trip a breaker). A CLI that reported trouble before it was stopped (its retry
// notices: network, server, rate limit) still counts.
func callerCut(env callresult.Envelope, timeout, limit time.Duration, format string) bool {
	e := env.Error
	if e == nil || e.Code != errcode.Timeout || timeout <= 0 || timeout >= limit {
		return false
	}
	if r, err := output.ParseProvider(format, []byte(e.PartialStdout)); err == nil && r.Content != "" {
		return true // part of an answer: the provider works, the time was too short
	}
	return output.ClassifyTimeout(e.PartialStdout, e.Stderr).Category == output.CategoryTimeout
}

// failedUnlessInput is a failure of category, except that a request the provider refused as
// invalid (validation: a bad prompt or model) is the caller's, not the provider's health: neutral,
// so that no input can trip a breaker.
func failedUnlessInput(category string) (callOutcome, string) {
	if category == output.CategoryValidation {
		return outcomeNeutral, ""
	}
	return outcomeFailed, category
}
